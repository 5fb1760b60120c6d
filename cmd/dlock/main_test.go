package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// server is the Redis server the tests lock on: dlock run's promises are
// about several processes, so they need a real shared backend.
var server testserver.Target

// binary is the dlock command built for these tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dlock-cmd-test")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "dlock")
	if out, err := exec.Command("go", "build", "-race", "-o", binary, ".").CombinedOutput(); err != nil {
		panic("building dlock: " + err.Error() + "\n" + string(out))
	}
	defer os.RemoveAll(dir)
	testserver.Main(m, testserver.RedisTarget, &server)
}

// result is how a dlock process ended.
type result struct {
	code           int
	stdout, stderr string
}

// dlockCmd prepares the dlock binary with args, without a configuration
// from the environment.
func dlockCmd(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "DLOCK_CONFIG=", "DLOCK_URL=", "DLOCK_BACKEND=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return cmd, &stdout, &stderr
}

func wait(t *testing.T, cmd *exec.Cmd, stdout, stderr *bytes.Buffer) result {
	t.Helper()
	err := cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("dlock: %v", err)
	}
	return result{cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()}
}

// dlockRun runs dlock with args to completion.
func dlockRun(t *testing.T, args ...string) result {
	t.Helper()
	cmd, stdout, stderr := dlockCmd(t, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return wait(t, cmd, stdout, stderr)
}

// hold takes key through the library, as another host would.
func hold(t *testing.T, key string, opts ...dlock.Option) (dlock.Lease, *dlock.Client) {
	t.Helper()
	c, err := dlock.Open(t.Context(), server.URL, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	m := testkit.Mutex(t, c, key)
	l := testkit.Lock(t, t.Context(), m)
	return l, c
}

// waitForFile polls until path exists: the test observes a child process
// it does not otherwise share memory with.
func waitForFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return string(b)
}

// runAll runs n dlock processes with args at once, each with D=dir in its
// environment, and fails t for each that does not exit 0.
func runAll(t *testing.T, n int, dir string, args ...string) {
	t.Helper()
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for range n {
		cmd, stdout, stderr := dlockCmd(t, args...)
		cmd.Env = append(cmd.Env, "D="+dir)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
		outs = append(outs, stdout, stderr)
	}
	for i, cmd := range cmds {
		if r := wait(t, cmd, outs[2*i], outs[2*i+1]); r.code != 0 {
			t.Errorf("dlock run %d: exit %d: %s", i, r.code, r.stderr)
		}
	}
}

// Two dlock run processes on one key: their commands never overlap (each
// checks with an atomic mkdir), and their fencing tokens rise.
func TestRunExcludesAcrossProcesses(t *testing.T) {
	checkExcludesAcrossProcesses(t, "run")
}

// checkExcludesAcrossProcesses runs six dlock processes of subcommand (run
// or elect) on one key, each running a command that checks with an atomic
// mkdir that no other is inside and records DLOCK_TOKEN: the commands must
// never overlap, each must run once, and the tokens must rise in the order
// the commands ran.
func checkExcludesAcrossProcesses(t *testing.T, subcommand string) {
	t.Helper()
	server.Need(t)
	dir := t.TempDir()
	key := testkit.Key(t)
	script := `mkdir "$D/inside" || echo overlap >> "$D/violations"; echo "$DLOCK_TOKEN" >> "$D/tokens"; sleep 0.2; rmdir "$D/inside"`
	runAll(t, 6, dir, subcommand, "--url", server.URL, "--key", key, "--", "sh", "-c", script)
	if v := readFile(t, filepath.Join(dir, "violations")); v != "" {
		t.Errorf("commands overlapped: %s", v)
	}
	tokens := strings.Fields(readFile(t, filepath.Join(dir, "tokens")))
	if len(tokens) != 6 {
		t.Fatalf("tokens: got %v, want 6", tokens)
	}
	for i := 1; i < len(tokens); i++ {
		if len(tokens[i]) < len(tokens[i-1]) || (len(tokens[i]) == len(tokens[i-1]) && tokens[i] <= tokens[i-1]) {
			t.Errorf("tokens %v do not rise", tokens)
		}
	}
}

// Five dlock run processes on a semaphore of 2 permits: never more than 2
// commands at once (each counts those inside after entering), each knowing
// its permit by DLOCK_KEY; a sixth with --no-wait while 2 hold is busy.
func TestRunPermits(t *testing.T) {
	server.Need(t)
	dir := t.TempDir()
	key := testkit.Key(t)
	script := `mkdir "$D/in.$$"; n=$(ls -d "$D"/in.* | wc -l); [ "$n" -le 2 ] || echo "$n inside" >> "$D/violations"; echo "$DLOCK_KEY" >> "$D/keys"; sleep 0.2; rmdir "$D/in.$$"`
	runAll(t, 5, dir, "run", "--url", server.URL, "--key", key, "--permits", "2", "--", "sh", "-c", script)
	if v := readFile(t, filepath.Join(dir, "violations")); v != "" {
		t.Errorf("more commands than permits at once: %s", v)
	}
	keys := strings.Fields(readFile(t, filepath.Join(dir, "keys")))
	if len(keys) != 5 {
		t.Fatalf("DLOCK_KEY: got %v, want 5", keys)
	}
	for _, k := range keys {
		if k != key+"/permit/0" && k != key+"/permit/1" {
			t.Errorf("DLOCK_KEY %q, want the permit's key, %s/permit/0 or 1", k, key)
		}
	}

	c, err := dlock.Open(t.Context(), server.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	s, err := c.Semaphore(key, 2)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := s.TryAcquire(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if r := dlockRun(t, "run", "--url", server.URL, "--key", key, "--permits", "2", "--no-wait", "--", "true"); r.code != exitBusy || !strings.Contains(r.stderr, "all 2 permits") {
		t.Errorf("--no-wait with every permit held: exit %d (%s), want %d", r.code, r.stderr, exitBusy)
	}
}

func TestRunBusy(t *testing.T) {
	server.Need(t)
	key := testkit.Key(t)
	hold(t, key)
	if r := dlockRun(t, "run", "--url", server.URL, "--key", key, "--no-wait", "--", "true"); r.code != exitBusy {
		t.Errorf("--no-wait on a held lock: exit %d (%s), want %d", r.code, r.stderr, exitBusy)
	}
	// --wait bounds connecting too: 2 s leaves a loaded machine room to
	// connect before the wait for the lock runs out.
	start := time.Now()
	r := dlockRun(t, "run", "--url", server.URL, "--key", key, "--wait", "2s", "--", "true")
	if r.code != exitBusy || !strings.Contains(r.stderr, "still held after waiting 2s") {
		t.Errorf("--wait 2s on a held lock: exit %d (%s), want %d", r.code, r.stderr, exitBusy)
	}
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("--wait 2s gave up after %v", took)
	}
}

// The command gets the lock's key, token and backend, and its exit status
// is dlock's.
func TestRunEnvironmentAndStatus(t *testing.T) {
	server.Need(t)
	key := testkit.Key(t)
	r := dlockRun(t, "run", "--url", server.URL, "--key", key, "--", "sh", "-c", `echo "$DLOCK_KEY $DLOCK_BACKEND $DLOCK_TOKEN"; exit 7`)
	if r.code != 7 {
		t.Errorf("exit %d (%s), want the command's 7", r.code, r.stderr)
	}
	f := strings.Fields(r.stdout)
	if len(f) != 3 || f[0] != key || f[1] != "redis" || f[2] == "0" {
		t.Errorf("the command saw %q, want the key, redis and a token", r.stdout)
	}
	if r := dlockRun(t, "run", "--url", server.URL, "--key", key, "--", "/no/such/command"); r.code != exitNotFound {
		t.Errorf("missing command: exit %d, want %d", r.code, exitNotFound)
	}
	// The lock was released each time.
	l, _ := hold(t, key)
	_ = l.Unlock(t.Context())
}

func TestRunForwardsSignals(t *testing.T) {
	server.Need(t)
	dir := t.TempDir()
	cmd, stdout, stderr := dlockCmd(t, "run", "--url", server.URL, "--key", testkit.Key(t), "--", "sh", "-c",
		`trap 'echo usr1 > "$D/got"; exit 5' USR1; touch "$D/ready"; while :; do sleep 0.05; done`)
	cmd.Env = append(cmd.Env, "D="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitForFile(t, filepath.Join(dir, "ready"))
	if err := cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	r := wait(t, cmd, stdout, stderr)
	if r.code != 5 || strings.TrimSpace(readFile(t, filepath.Join(dir, "got"))) != "usr1" {
		t.Errorf("exit %d (%s), file %q: want the command to get USR1 and exit 5", r.code, r.stderr, readFile(t, filepath.Join(dir, "got")))
	}
}

// A lost lock stops the command: SIGTERM, then SIGKILL after the grace.
func TestRunLostLock(t *testing.T) {
	server.Need(t)
	for name, script := range map[string]string{
		"stops on SIGTERM": `trap 'echo term >> "$D/log"; exit 3' TERM; touch "$D/ready"; while :; do sleep 0.05; done`,
		"ignores SIGTERM":  `trap 'echo term >> "$D/log"' TERM; touch "$D/ready"; while :; do sleep 0.05; done`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			key := testkit.Key(t)
			cmd, stdout, stderr := dlockCmd(t, "run", "--url", server.URL, "--key", key, "--ttl", "1s", "--grace", "500ms", "--", "sh", "-c", script)
			cmd.Env = append(cmd.Env, "D="+dir)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waitForFile(t, filepath.Join(dir, "ready"))
			deleteLock(t, key)
			r := wait(t, cmd, stdout, stderr)
			if r.code != exitLost || !strings.Contains(r.stderr, "lost") {
				t.Errorf("exit %d (%s), want %d", r.code, r.stderr, exitLost)
			}
			if !strings.Contains(readFile(t, filepath.Join(dir, "log")), "term") {
				t.Errorf("the command never got SIGTERM")
			}
		})
	}
}

// deleteLock removes key's lock behind its holder's back, as an operator
// with redis-cli would (the redis driver's documented key layout).
func deleteLock(t *testing.T, key string) {
	t.Helper()
	opt, err := goredis.ParseURL(server.URL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := goredis.NewClient(opt)
	defer rdb.Close()
	if n, err := rdb.Del(t.Context(), "dlock:{"+key+"}").Result(); err != nil || n != 1 {
		t.Fatalf("deleting the lock: deleted %d, %v", n, err)
	}
}

func TestUsageErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "dlock.yaml")
	if err := os.WriteFile(bad, []byte("backends:\n  main:\n    url: mem://x\n    ttl: soon\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"no key":         {[]string{"run", "--url", "mem://x", "--", "true"}, "key"},
		"no command":     {[]string{"run", "--url", "mem://x", "--key", "k"}, "arg"},
		"bad ttl":        {[]string{"run", "--url", "mem://x", "--key", "k", "--ttl", "1ns", "--", "true"}, "invalid TTL"},
		"unknown flag":   {[]string{"run", "--frobnicate"}, "unknown flag"},
		"unknown scheme": {[]string{"run", "--url", "nosuch://x", "--key", "k", "--", "true"}, "nosuch"},
		"both waits":     {[]string{"run", "--url", "mem://x", "--key", "k", "--wait", "1s", "--no-wait", "--", "true"}, "no-wait"},
		"no permits":     {[]string{"run", "--url", "mem://x", "--key", "k", "--permits", "0", "--", "true"}, "invalid number of permits"},
		"bad config":     {[]string{"run", "--config", bad, "--key", "k", "--", "true"}, bad + ":4: backends.main.ttl"},
		"no backend":     {[]string{"inspect", "--key", "k"}, "no backend configured"},
	} {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			t.Setenv("DLOCK_URL", "")
			t.Setenv("DLOCK_CONFIG", "")
			if code := run(t.Context(), tc.args, &stdout, &stderr); code != exitUsage {
				t.Errorf("exit %d, want %d; stderr: %s", code, exitUsage, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr %q does not mention %q", stderr.String(), tc.want)
			}
		})
	}
}

func TestInspect(t *testing.T) {
	server.Need(t)
	key := testkit.Key(t)
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"inspect", "--url", server.URL, "--key", key}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "not held") {
		t.Errorf("free lock: exit %d, %q %q", code, stdout.String(), stderr.String())
	}
	l, _ := hold(t, key)
	stdout.Reset()
	if code := run(t.Context(), []string{"inspect", "--url", server.URL, "--key", key}, &stdout, &stderr); code != 0 ||
		!strings.Contains(stdout.String(), "held (exclusive") || !strings.Contains(stdout.String(), "token:") {
		t.Errorf("held lock: exit %d, %q %q", code, stdout.String(), stderr.String())
	}
	_ = l.Unlock(t.Context())
}

// A short bench run on the embedded backend: the shape of the results, not
// the speed.
func TestBenchQuick(t *testing.T) {
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"bench", "--quick", "--backends", "memory", "--out", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "memory") || !strings.Contains(stderr.String(), "bench: memory: uncontended") {
		t.Errorf("no table row or progress for memory:\n%s\n%s", stdout.String(), stderr.String())
	}
	data := readFile(t, filepath.Join(out, "results.json"))
	for _, want := range []string{`"backend": "memory"`, `"uncontended"`, `"handoff"`, `"contended"`, `"held"`, `"jain"`} {
		if !strings.Contains(data, want) {
			t.Errorf("results.json lacks %s", want)
		}
	}
	for _, chart := range []string{"latency", "handoff", "throughput", "requests"} {
		for _, ext := range []string{".svg", ".png"} {
			if fi, err := os.Stat(filepath.Join(out, chart+ext)); err != nil || fi.Size() == 0 {
				t.Errorf("chart %s%s missing or empty: %v", chart, ext, err)
			}
		}
	}
}

// bench --peers starts its own servers, so it takes no --url, and runs the
// comparison of a checkout, so it refuses to run outside one: both are
// usage errors that say why.
func TestBenchPeersUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"bench", "--peers", "--url", "mem://x"}, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "takes no --url") {
		t.Errorf("--peers --url: exit %d, %q; want %d and the reason", code, stderr.String(), exitUsage)
	}
	t.Chdir(t.TempDir())
	stderr.Reset()
	if code := run(t.Context(), []string{"bench", "--peers"}, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "dlock checkout") {
		t.Errorf("--peers outside a checkout: exit %d, %q; want %d and the reason", code, stderr.String(), exitUsage)
	}
}

// inspect prints the value an election's leader campaigned with, where the
// backend stores one (the memory backend, shared by name in this process).
func TestInspectValue(t *testing.T) {
	url := memURL(t)
	c, err := dlock.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	key := testkit.Key(t)
	e, err := c.Election(key)
	if err != nil {
		t.Fatal(err)
	}
	l, err := e.Campaign(t.Context(), "node-7:8080")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(context.Background())
	code, stdout, stderr := runWithin(t, "inspect", "--url", url, "--key", key)
	if code != 0 || !strings.Contains(stdout, "value:") || !strings.Contains(stdout, "node-7:8080") {
		t.Errorf("exit %d, %q %q; want the leader's value", code, stdout, stderr)
	}
}
