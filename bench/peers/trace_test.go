package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/benchkit"
	"github.com/dlock-go/dlock/internal/benchtargets"
	"github.com/dlock-go/dlock/internal/testserver"
)

// TestRedLockSuccession is a measurement, not a check (opt-in: set
// DLOCK_TRACE=1): on five Redis masters, redsync and dlock's RedLock each
// run 64 contenders of one key (a client each, looping Lock then Unlock, as
// the contended run does), one after the other, and it logs, from each
// critical section's timestamps, who held the lock next: how often the
// releaser took it again at once (barging), the gap from one holder's
// Unlock called to the next holder's Lock returned (all, and split by
// whether the next holder is the releaser or another), the sections per
// second, Jain's fairness index and the requests per section.
//
//	DLOCK_TRACE=1 go test -run RedLockSuccession -v .   (in bench/peers)
//
// DLOCK_TRACE_CONTENDERS and DLOCK_TRACE_SECONDS change the 64 contenders
// and the 5 s runs.
func TestRedLockSuccession(t *testing.T) {
	if os.Getenv("DLOCK_TRACE") == "" {
		t.Skip("a measurement: set DLOCK_TRACE=1 to run it")
	}
	contenders := envInt(t, "DLOCK_TRACE_CONTENDERS", 64)
	runFor := time.Duration(envInt(t, "DLOCK_TRACE_SECONDS", 5)) * time.Second
	ctx := t.Context()
	g, err := testserver.StartRedisGroup(ctx, redlockMasters)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Terminate(context.WithoutCancel(ctx)) })

	var sent atomic.Uint64
	rs := redsyncPeer(&sent, g.Addrs()...)
	var rsLockers []benchkit.Locker
	for range contenders {
		l, done, err := rs.newLocker(ctx, "succession/redsync")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(done)
		rsLockers = append(rsLockers, l)
	}
	target, closeTarget, err := benchtargets.RedLock(g.RedLockURL(), g.Addrs())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeTarget)
	var dlLockers []benchkit.Locker
	for range contenders {
		c, err := target.NewClient(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(context.WithoutCancel(ctx)) })
		m, err := c.Mutex("succession/dlock", dlock.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		dlLockers = append(dlLockers, benchkit.MutexLocker(m))
	}
	// The masters count dlock's requests (its clients are inside the
	// driver); the runs take turns, so redsync's are not among them.
	requests := target.Requests
	for _, run := range []struct {
		name     string
		lockers  []benchkit.Locker
		requests func() uint64
	}{
		{"redsync", rsLockers, sent.Load},
		{"dlock", dlLockers, requests},
	} {
		succession(ctx, t, run.lockers, 500*time.Millisecond) // warm-up
		r0 := run.requests()
		sections := succession(ctx, t, run.lockers, runFor)
		logSuccession(t, run.name, sections, contenders, runFor, run.requests()-r0)
	}
}

// envInt is the positive integer in the environment variable name, or def.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

// held is one critical section: who held the lock, when its Lock returned
// and when it called Unlock.
type held struct {
	contender      int
	locked, unlock time.Time
}

// succession runs every locker's Lock/Unlock loop for d and returns the
// critical sections in the order they were held.
func succession(ctx context.Context, t *testing.T, lockers []benchkit.Locker, d time.Duration) []held {
	t.Helper()
	runCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var mu sync.Mutex
	var all []held
	var firstErr error
	var wg sync.WaitGroup
	for c, l := range lockers {
		wg.Go(func() {
			for runCtx.Err() == nil {
				unlock, err := l.Lock(runCtx)
				if err != nil {
					if runCtx.Err() == nil {
						mu.Lock()
						firstErr = err
						mu.Unlock()
					}
					return
				}
				h := held{contender: c, locked: time.Now()}
				h.unlock = time.Now()
				_ = unlock(ctx) // a release that fails lets the lock lapse: no worse for this count
				mu.Lock()
				all = append(all, h)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	slices.SortFunc(all, func(a, b held) int { return a.locked.Compare(b.locked) })
	return all
}

// logSuccession logs the figures of one run (see TestRedLockSuccession).
func logSuccession(t *testing.T, name string, sections []held, contenders int, d time.Duration, requests uint64) {
	counts := make([]float64, contenders)
	var all, again, other []time.Duration
	for i, s := range sections {
		counts[s.contender]++
		if i == 0 {
			continue
		}
		prev := sections[i-1]
		gap := s.locked.Sub(prev.unlock)
		all = append(all, gap)
		if s.contender == prev.contender {
			again = append(again, gap)
		} else {
			other = append(other, gap)
		}
	}
	var sum, sq float64
	for _, c := range counts {
		sum += c
		sq += c * c
	}
	jain := sum * sum / (float64(contenders) * sq)
	perSection := "not counted"
	if requests > 0 {
		perSection = fmt.Sprintf("%.1f", float64(requests)/float64(len(sections)))
	}
	t.Logf("%s: %d contenders, %v: %d sections (%.0f/s), Jain %.2f, requests per section %s",
		name, contenders, d, len(sections), float64(len(sections))/d.Seconds(), jain, perSection)
	t.Logf("%s:   releaser took the lock again next: %d of %d successions (%.0f%%)",
		name, len(again), len(all), 100*float64(len(again))/float64(max(1, len(all))))
	for _, g := range []struct {
		what string
		ds   []time.Duration
	}{{"all", all}, {"to the releaser itself", again}, {"to another contender", other}} {
		if len(g.ds) == 0 {
			continue
		}
		slices.Sort(g.ds)
		t.Logf("%s:   Unlock called → next Lock returned, %-24s p50 %8v  p90 %8v  (n=%d)",
			name, g.what, g.ds[len(g.ds)/2].Round(time.Microsecond), g.ds[len(g.ds)*9/10].Round(time.Microsecond), len(g.ds))
	}
}
