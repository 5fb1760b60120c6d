package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/drivers/memory"
	"github.com/dlock-go/dlock/internal/testkit"
)

// runWithin runs dlock in-process with args, which must end within 20 s:
// generous for a command asked to give up after 1 s.
func runWithin(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut testkit.Buffer
	done := make(chan int, 1)
	go func() { done <- run(t.Context(), args, &out, &errOut) }()
	timer := time.NewTimer(20 * time.Second)
	defer timer.Stop()
	select {
	case code = <-done:
	case <-timer.C:
		t.Fatalf("dlock %s still running after 20 s; stderr: %s", strings.Join(args, " "), errOut.String())
	}
	return code, out.String(), errOut.String()
}

// dlock run against a ZooKeeper or etcd that is down, or that accepts
// connections and never answers, gives up within --connect-timeout, or
// within --wait, with status 69 and the reason (their client libraries
// retry by themselves, and used to hang dlock run until it was killed).
func TestRunConnectTimeout(t *testing.T) {
	for _, scheme := range []string{"zk", "etcd"} {
		for name, addr := range map[string]func(testing.TB) string{"refused": testkit.ClosedAddr, "silent": testkit.SilentAddr} {
			t.Run(scheme+"/"+name, func(t *testing.T) {
				url := scheme + "://" + addr(t) + "/x"
				for _, flag := range []string{"--connect-timeout", "--wait"} {
					code, _, stderr := runWithin(t, "run", "--url", url, "--key", "k", flag, "1s", "--", "true")
					if code != exitUnavailable || !strings.Contains(stderr, "no connection within "+flag+" 1s") {
						t.Errorf("%s 1s: exit %d, stderr %q; want %d and the reason", flag, code, stderr, exitUnavailable)
					}
				}
			})
		}
	}
	if code, _, stderr := runWithin(t, "run", "--url", "mem://x", "--key", "k", "--connect-timeout", "0s", "--", "true"); code != exitUsage {
		t.Errorf("--connect-timeout 0s: exit %d (%s), want %d", code, stderr, exitUsage)
	}
}

// The client libraries' own lines show with -v only: without it, a
// backend that refuses connections gets one line from dlock, its error.
func TestVerboseShowsLibraryLogs(t *testing.T) {
	url := "zk://" + testkit.ClosedAddr(t) + "/x"
	code, _, quiet := runWithin(t, "run", "--url", url, "--key", "k", "--connect-timeout", "1s", "--", "true")
	if code != exitUnavailable || strings.Count(quiet, "\n") != 1 || !strings.HasPrefix(quiet, "dlock: backend zk: ") {
		t.Errorf("without -v: exit %d, stderr %q; want %d and one line from dlock", code, quiet, exitUnavailable)
	}
	code, _, verbose := runWithin(t, "-v", "run", "--url", url, "--key", "k", "--connect-timeout", "1s", "--", "true")
	if code != exitUnavailable || !strings.Contains(verbose, "lib=go-zookeeper") {
		t.Errorf("with -v: exit %d, stderr %q; want %d and go-zookeeper's lines", code, verbose, exitUnavailable)
	}
	url = "redis://" + testkit.ClosedAddr(t) + "/0"
	if code, _, quiet := runWithin(t, "run", "--url", url, "--key", "k", "--", "true"); code != exitUnavailable || strings.Count(quiet, "\n") != 1 {
		t.Errorf("redis without -v: exit %d, stderr %q; want %d and one line from dlock", code, quiet, exitUnavailable)
	}
}

// An error says "dlock:" once, however many errors of package dlock its
// chain holds.
func TestOneErrorPrefix(t *testing.T) {
	code, _, stderr := runWithin(t, "run", "--url", "mem://x", "--key", "", "--", "true")
	if code != exitUsage || stderr != "dlock: invalid key: empty\n" {
		t.Errorf("empty key: exit %d, stderr %q; want %d and \"dlock: invalid key: empty\"", code, stderr, exitUsage)
	}
	code, _, stderr = runWithin(t, "run", "--url", "redis://"+testkit.ClosedAddr(t)+"/0", "--key", "k", "--", "true")
	if code != exitUnavailable || strings.Count(stderr, "dlock:") != 1 {
		t.Errorf("refused: exit %d, stderr %q; want %d and one \"dlock:\"", code, stderr, exitUnavailable)
	}
}

// inspect --json names the mode rather than numbering it.
func TestInspectJSON(t *testing.T) {
	d := memory.New(memory.Named("inspect-json"))
	t.Cleanup(func() { _ = d.Close() })
	l := testkit.MustAcquire(t, t.Context(), d, testkit.Request("k", time.Minute))
	defer func() { _ = l.Release(context.Background()) }()
	code, stdout, stderr := runWithin(t, "inspect", "--url", "mem://inspect-json", "--key", "k", "--json")
	var got map[string]any
	if code != 0 || json.Unmarshal([]byte(stdout), &got) != nil || got["mode"] != "exclusive" || got["held"] != true {
		t.Errorf("exit %d, stdout %s, stderr %s; want held, \"mode\": \"exclusive\"", code, stdout, stderr)
	}
}
