package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/benchkit"
	"github.com/dlock-go/dlock/internal/benchtargets"
	"github.com/dlock-go/dlock/internal/testserver"

	_ "github.com/dlock-go/dlock/drivers/memory"
)

// within runs f, which must return within 2 minutes (a quick run takes
// seconds; the bound is for a loaded machine, and only catches a hang).
func within(t *testing.T, f func(ctx context.Context)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); f(ctx) }()
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		t.Fatal("still running after 3 minutes")
	}
}

// checkRows checks that every contender got every figure: an uncontended
// latency (but the shared dlock row), handoffs to 1 and 16 waiters, and a
// contended run.
func checkRows(t *testing.T, rows []row, contenders int) {
	t.Helper()
	if len(rows) != contenders {
		t.Fatalf("%d rows, want %d: %+v", len(rows), contenders, rows)
	}
	for _, r := range rows {
		if (r.Uncontended == nil) != (r.Contender == "dlock, one Client") || (r.Uncontended != nil && r.Uncontended.N != quick.uncontendedRounds) {
			t.Errorf("%s: uncontended %+v", r.Contender, r.Uncontended)
		}
		if len(r.Handoff) != 2 || r.handoff(1).Latency.N == 0 || r.handoff(16).Latency.N == 0 {
			t.Errorf("%s: handoffs %+v, want some to 1 waiter and to 16", r.Contender, r.Handoff)
		}
		if c := r.Contended; c.Goroutines != quick.contenders || c.Sections == 0 || c.Jain <= 0 {
			t.Errorf("%s: contended %+v", r.Contender, c)
		}
	}
}

// The comparison on the in-process backend, with a polled TryLock as the
// peer: every contender gets every figure, and the table and the charts
// are written.
func TestMeasureInProcess(t *testing.T) {
	target := benchtargets.Memory()
	polled := peer{name: "TryLock, polled", newLocker: func(ctx context.Context, key string) (benchkit.Locker, func(), error) {
		c, err := target.NewClient(ctx)
		if err != nil {
			return nil, nil, err
		}
		m, err := c.Mutex(key)
		if err != nil {
			return nil, nil, err
		}
		var lease dlock.Lease
		p := &benchkit.Poller{
			Try: func(ctx context.Context, _, _ string) (bool, error) {
				l, err := m.TryLock(ctx)
				if errors.Is(err, dlock.ErrLocked) {
					return false, nil
				}
				lease = l
				return err == nil, err
			},
			Release: func(ctx context.Context, _, _ string) error { return lease.Unlock(ctx) },
			Retry:   time.Millisecond,
		}
		return p.Locker(key), func() { _ = c.Close(context.Background()) }, nil
	}}
	var rows []row
	var err error
	within(t, func(ctx context.Context) {
		rows, err = measure(ctx, "memory", &env{dlock: target, peers: []peer{polled}}, quick, func(string) {})
	})
	if err != nil {
		t.Fatal(err)
	}
	checkRows(t, rows, 3)
	var out bytes.Buffer
	printTable(&out, results{Rows: rows})
	if got := out.String(); strings.Count(got, "\n") != 4 || !strings.Contains(got, "TryLock, polled") {
		t.Errorf("table:\n%s", got)
	}
	out.Reset()
	printMarkdown(&out, results{Rows: rows})
	if got := out.String(); strings.Count(got, "\n") != 5 || !strings.Contains(got, "| memory | dlock |") || !strings.Contains(got, "|  | dlock, one Client | = |") {
		t.Errorf("Markdown table:\n%s", got)
	}
	for x, want := range map[float64]string{1234567.4: "1,234,567", 999.6: "1,000", 0.31: "0.3"} {
		if got := thousands(x); got != want {
			t.Errorf("thousands(%v) = %q, want %q", x, got, want)
		}
	}
	dir := t.TempDir()
	if err := writeOut(dir, results{Rows: rows}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"results.json", "peers-handoff.png", "peers-throughput.svg", "peers-latency.png"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}

// The Redis comparison against the real server in a container: dlock,
// redsync and redislock each get every figure. Skipped when no Docker
// engine answers.
func TestRedisPeers(t *testing.T) {
	var rows []row
	var err error
	within(t, func(ctx context.Context) {
		rows, err = runBackend(ctx, redisBackend, quick, func(string) {})
	})
	if errors.Is(err, testserver.ErrNoDocker) || (err != nil && strings.Contains(err.Error(), "no Docker engine")) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	checkRows(t, rows, 4)
}

// A contended run's size other than positive is a bad flag, refused before
// any server starts.
func TestContendersFlag(t *testing.T) {
	var out, errs strings.Builder
	if code := run(t.Context(), []string{"--contenders", "-1", "--backends", "redlock"}, &out, &errs); code != 64 {
		t.Errorf("--contenders -1: exit status %d, want 64 (stderr %q)", code, errs.String())
	}
	if !strings.Contains(errs.String(), "--contenders") {
		t.Errorf("--contenders -1: stderr %q does not name the flag", errs.String())
	}
}
