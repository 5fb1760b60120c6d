package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
)

// Six dlock elect processes on one key: their commands never overlap, each
// runs once, leading in turn as the one before resigns, and the terms rise.
func TestElectExcludesAcrossProcesses(t *testing.T) {
	checkExcludesAcrossProcesses(t, "elect")
}

// The command's exit status is dlock elect's; a missing command is 127.
func TestElectStatus(t *testing.T) {
	server.Need(t)
	key := testkit.Key(t)
	if r := dlockRun(t, "elect", "--url", server.URL, "--key", key, "--", "sh", "-c", `test "$DLOCK_KEY" = "`+key+`" || exit 9; exit 7`); r.code != 7 {
		t.Errorf("exit %d (%s), want the command's 7", r.code, r.stderr)
	}
	if r := dlockRun(t, "elect", "--url", server.URL, "--key", key, "--", "/no/such/command"); r.code != exitNotFound {
		t.Errorf("missing command: exit %d, want %d", r.code, exitNotFound)
	}
}

// A candidate that does not lead within --wait gives up with status 75.
func TestElectWait(t *testing.T) {
	server.Need(t)
	key := testkit.Key(t)
	c, err := dlock.Open(t.Context(), server.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	e, err := c.Election(key)
	if err != nil {
		t.Fatal(err)
	}
	l, err := e.Campaign(t.Context(), "other")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(context.Background())
	r := dlockRun(t, "elect", "--url", server.URL, "--key", key, "--wait", "2s", "--", "true")
	if r.code != exitBusy || !strings.Contains(r.stderr, "leadership") {
		t.Errorf("--wait 2s with another leader: exit %d (%s), want %d", r.code, r.stderr, exitBusy)
	}
}

// A lost leadership stops the command: SIGTERM, then status 76.
func TestElectLostLeadership(t *testing.T) {
	server.Need(t)
	dir := t.TempDir()
	key := testkit.Key(t)
	cmd, stdout, stderr := dlockCmd(t, "elect", "--url", server.URL, "--key", key, "--ttl", "1s", "--grace", "500ms", "--", "sh", "-c",
		`trap 'echo term >> "$D/log"; exit 3' TERM; touch "$D/ready"; while :; do sleep 0.05; done`)
	cmd.Env = append(cmd.Env, "D="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitForFile(t, filepath.Join(dir, "ready"))
	deleteLock(t, key)
	r := wait(t, cmd, stdout, stderr)
	if r.code != exitLost || !strings.Contains(r.stderr, "leadership of") {
		t.Errorf("exit %d (%s), want %d", r.code, r.stderr, exitLost)
	}
	if !strings.Contains(readFile(t, filepath.Join(dir, "log")), "term") {
		t.Errorf("the command never got SIGTERM")
	}
}

// While the command runs, the election's leader is this candidate: by
// default host:pid (dlock runs in this process here), with the term the
// command got as DLOCK_TOKEN; --value sets another. The memory backend
// stores values, and is shared by name in this process.
func TestElectValue(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Skip("no hostname:", err)
	}
	for name, tc := range map[string]struct {
		flags []string
		want  string
	}{
		"default": {nil, host + ":" + strconv.Itoa(os.Getpid())},
		"given":   {[]string{"--value", "node-7:8080"}, "node-7:8080"},
	} {
		t.Run(name, func(t *testing.T) {
			url := memURL(t)
			key := testkit.Key(t)
			dir := t.TempDir()
			t.Setenv("D", dir)
			args := append([]string{"elect", "--url", url, "--key", key}, tc.flags...)
			args = append(args, "--", "sh", "-c", `echo "$DLOCK_TOKEN" > "$D/term"; touch "$D/ready"; while [ ! -e "$D/go" ]; do sleep 0.05; done`)
			done := make(chan int, 1)
			var out, errOut testkit.Buffer
			go func() { done <- run(context.Background(), args, &out, &errOut) }()
			defer func() { _ = os.WriteFile(filepath.Join(dir, "go"), nil, 0o600) }() // lets dlock end on failure too
			waitForFileOrExit(t, filepath.Join(dir, "ready"), done, &errOut)

			c, err := dlock.Open(t.Context(), url)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(context.Background())
			e, err := c.Election(key)
			if err != nil {
				t.Fatal(err)
			}
			got, err := e.Leader(t.Context())
			term := strings.TrimSpace(readFile(t, filepath.Join(dir, "term")))
			if err != nil || got.Value != tc.want || strconv.FormatUint(got.Term, 10) != term {
				t.Errorf("Leader: %+v, %v; want value %q and term %s (DLOCK_TOKEN)", got, err, tc.want, term)
			}
			if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if code := <-done; code != 0 {
				t.Errorf("exit %d: %s", code, errOut.String())
			}
			if _, err := e.Leader(t.Context()); err == nil {
				t.Errorf("a leader after the command exited: dlock elect did not resign")
			}
		})
	}
}

func TestElectUsageErrors(t *testing.T) {
	t.Setenv("DLOCK_URL", "")
	t.Setenv("DLOCK_CONFIG", "")
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"no key":        {[]string{"elect", "--url", "mem://x", "--", "true"}, "key"},
		"no command":    {[]string{"elect", "--url", "mem://x", "--key", "k"}, "arg"},
		"empty value":   {[]string{"elect", "--url", "mem://x", "--key", "k", "--value", "", "--", "true"}, "--value"},
		"control value": {[]string{"elect", "--url", "mem://x", "--key", "k", "--value", "a\nb", "--", "true"}, "control character"},
		"bad ttl":       {[]string{"elect", "--url", "mem://x", "--key", "k", "--ttl", "1ns", "--", "true"}, "invalid TTL"},
	} {
		t.Run(name, func(t *testing.T) {
			code, _, stderr := runWithin(t, tc.args...)
			if code != exitUsage || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want %d mentioning %q", code, stderr, exitUsage, tc.want)
			}
		})
	}
}

// memURL names a memory backend of the test's own: hostnames allow letters,
// digits and hyphens.
func memURL(t *testing.T) string {
	return "mem://" + strings.ToLower(strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, testkit.Key(t)))
}

// waitForFileOrExit polls until path exists, failing t if dlock, running
// in this process, exits first.
func waitForFileOrExit(t *testing.T, path string, done <-chan int, stderr *testkit.Buffer) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		select {
		case code := <-done:
			t.Fatalf("dlock exited %d before %s appeared: %s", code, path, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
