package benchkit

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestPolledContended runs the polling baseline over an in-process lock:
// every goroutine gets its turns, and a failing release fails the run.
func TestPolledContended(t *testing.T) {
	p, failRelease := mapPoller()
	c, err := MeasurePolledContended(t.Context(), p, 2, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if c.Goroutines != 2 || c.Clients != 1 || c.PerSecond <= 0 || c.Wait.P50 < 0 {
		t.Errorf("Contended %+v: want 2 goroutines, 1 client, a positive rate", c)
	}
	failRelease.Store(true)
	if _, err := MeasurePolledContended(t.Context(), p, 2, 200*time.Millisecond); err == nil {
		t.Error("a failing release did not fail the run")
	}
}

// mapPoller is a Poller over an in-process map; its releases fail once
// failRelease is set.
func mapPoller() (p *Poller, failRelease *atomic.Bool) {
	var mu sync.Mutex
	holder := map[string]string{}
	failRelease = new(atomic.Bool)
	return &Poller{
		Try: func(_ context.Context, key, id string) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			if holder[key] != "" {
				return false, nil
			}
			holder[key] = id
			return true, nil
		},
		Release: func(_ context.Context, key, id string) error {
			if failRelease.Load() {
				return errors.New("release failed")
			}
			mu.Lock()
			defer mu.Unlock()
			if holder[key] == id {
				delete(holder, key)
			}
			return nil
		},
		Retry: time.Millisecond,
	}, failRelease
}

// Handoffs over a polling lock, whose releaser would win the lock back at
// once if it asked: every grant but the first is timed as a handoff, with
// one locker (nobody to hand to), one waiter and several, and the run ends
// by its rounds or its time limit.
func TestHandoffLockers(t *testing.T) {
	p, _ := mapPoller()
	for _, tc := range []struct {
		lockers, rounds int
		limit, hold     time.Duration
	}{{1, 10, 0, 0}, {2, 20, 0, 0}, {5, 30, 0, 2 * time.Millisecond}, {3, 1 << 30, 200 * time.Millisecond, 0}} {
		ls := make([]Locker, tc.lockers)
		for i := range ls {
			ls[i] = p.Locker("one-key")
		}
		done := make(chan struct{})
		var h Handoff
		var err error
		go func() {
			defer close(done)
			h, err = MeasureHandoffLockers(t.Context(), ls, HandoffOptions{Clients: tc.lockers, Rounds: tc.rounds, Limit: tc.limit, Hold: tc.hold})
		}()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%d lockers: still running after 30 s", tc.lockers)
		}
		if err != nil {
			t.Fatalf("%d lockers: %v", tc.lockers, err)
		}
		if h.Waiters != tc.lockers-1 || h.Latency.N == 0 || (tc.limit == 0 && h.Latency.N != tc.rounds-1) {
			t.Errorf("%d lockers, %d rounds: %+v; want %d waiters and a handoff per grant but the first", tc.lockers, tc.rounds, h, tc.lockers-1)
		}
	}
}

// A contender that never gets the lock shows in the longest wait, though
// no Lock call of its returned.
func TestContendedCountsPendingWaits(t *testing.T) {
	never := &Poller{
		Try:     func(context.Context, string, string) (bool, error) { return false, nil },
		Release: func(context.Context, string, string) error { return nil },
		Retry:   time.Millisecond,
	}
	c, err := MeasurePolledContended(t.Context(), never, 2, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if c.Sections != 0 || c.Wait.N != 0 || c.Wait.Max <= 0 {
		t.Errorf("Contended %+v: want no section and the cut-short waits in Wait.Max", c)
	}
}
