package redis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

// Issue 15's scenario, through the public API: several Clients, each over a
// Driver of its own (a process each), and several goroutines per Client
// lock one key with context deadlines from a fraction of a round trip to a
// few milliseconds, so that many Lock calls end while a request is in
// flight, and hold it a few hundred µs. Grants by release made leases from
// pub/sub messages there, and gave two holders at once within seconds.
//
// The verdict uses only what each Lock returned and when: no two leases
// overlap while both are inside their deadlines ([grant, min(unlock,
// Deadline)), on this process's monotonic clock), tokens rise strictly in
// grant order, and no Deadline lies beyond what the call could have been
// promised (the TTL from the call's return, and from its start when it
// returned within the core's safety margin, TTL/100 + 2 ms).
func TestNoDoubleGrantUnderRandomDeadlines(t *testing.T) {
	server.Need(t)
	checkNoDoubleGrant(t, func(t *testing.T) driver.Driver { return newTestDriver(t, newRDB(t)) })
}

// noDoubleGrantTTL is long against the test (no renewal falls inside a
// hold) and gives a safety margin (12 ms) above quickBound.
const noDoubleGrantTTL = time.Second

// quickBound: a Lock that returned within it of its start is checked
// against start + TTL too. It is below the core's safety margin for
// noDoubleGrantTTL, so that the check holds for every correct grant: one
// made by a request that started before the call returned.
const quickBound = 10 * time.Millisecond

// grantRecord is one lease as the test saw it.
type grantRecord struct {
	client, goroutine int
	token             uint64
	start, granted    time.Time // Lock called, Lock returned
	unlock            time.Time // Unlock called
	deadline          time.Time // Deadline when granted
}

func (g grantRecord) String() string {
	return fmt.Sprintf("client %d goroutine %d token %d (granted %v, unlocked %v, deadline %v after its Lock started)",
		g.client, g.goroutine, g.token, g.granted.Sub(g.start), g.unlock.Sub(g.start), g.deadline.Sub(g.start))
}

// end is when the lease stopped counting as held: its Unlock, or its
// deadline when that came first.
func (g grantRecord) end() time.Time {
	if g.deadline.Before(g.unlock) {
		return g.deadline
	}
	return g.unlock
}

// checkNoDoubleGrant runs the scenario for about three seconds on Drivers
// made by newDriver, one per Client, and checks the verdict.
func checkNoDoubleGrant(t *testing.T, newDriver func(t *testing.T) driver.Driver) {
	const (
		clients    = 3
		goroutines = 4
		runFor     = 3 * time.Second
	)
	key := testkit.Key(t)
	var (
		mu        sync.Mutex
		grants    []grantRecord
		timeouts  int
		otherErrs []error
		wg        sync.WaitGroup
	)
	stop := time.Now().Add(runFor)
	for ci := range clients {
		c := testkit.Client(t, newDriver(t), dlock.WithTTL(noDoubleGrantTTL))
		m := testkit.Mutex(t, c, key)
		for gi := range goroutines {
			wg.Go(func() {
				// After the run, each goroutine locks once more with time
				// to wait its turn (and to retry a failed call), so that
				// every run has grants to judge however loaded the machine.
				var finalBy time.Time
				for {
					now := time.Now()
					timeout := lockDeadline()
					if !now.Before(stop) {
						if finalBy.IsZero() {
							finalBy = now.Add(finalLockDeadline)
						}
						if !now.Before(finalBy) {
							t.Errorf("client %d goroutine %d: no grant in %v after the run", ci, gi, finalLockDeadline)
							return
						}
						timeout = finalBy.Sub(now)
					}
					ctx, cancel := context.WithTimeout(context.Background(), timeout)
					start := time.Now()
					l, err := m.Lock(ctx)
					granted := time.Now()
					ended := ctx.Err() != nil
					cancel()
					if err != nil {
						// A failure other than the context's is not the
						// verdict's business (a RedLock master slower than
						// its timeout, on a loaded machine), but is shown.
						mu.Lock()
						if ended && errors.Is(err, context.DeadlineExceeded) {
							timeouts++
						} else {
							otherErrs = append(otherErrs, err)
						}
						mu.Unlock()
						continue
					}
					g := grantRecord{client: ci, goroutine: gi, token: l.Token(), start: start, granted: granted, deadline: l.Deadline()}
					time.Sleep(time.Duration(200+rand.IntN(300)) * time.Microsecond) // the critical section
					g.unlock = time.Now()
					uctx, ucancel := context.WithTimeout(context.Background(), 10*time.Second)
					_ = l.Unlock(uctx) // a lost lease says so here; the verdict is in the records
					ucancel()
					mu.Lock()
					grants = append(grants, g)
					mu.Unlock()
					if !finalBy.IsZero() {
						return
					}
				}
			})
		}
	}
	wg.Wait()
	overlaps, regressions := noDoubleGrantVerdict(t, grants)
	t.Logf("%d grants, %d Lock calls ended by their deadline, %d failed otherwise, %d overlaps, %d token regressions",
		len(grants), timeouts, len(otherErrs), overlaps, regressions)
	for _, err := range otherErrs[:min(len(otherErrs), 3)] {
		t.Logf("a Lock failed: %v", err)
	}
}

// finalLockDeadline bounds each goroutine's last Lock calls: the twelve of
// them queue behind each other, and a hold whose owner gave up (its release
// overtaken by its acquisition) may block the lock for a TTL.
const finalLockDeadline = 20 * time.Second

// lockDeadline draws a Lock call's context timeout, log-uniformly: half of
// them from 50 µs to 5 ms (a fraction of a round trip to several), half up
// to 50 ms, so that Drivers stay queued while their heads' requests end in
// flight (against grants by release, this mix found about twice as many
// double grants as one with long calls rarer).
func lockDeadline() time.Duration {
	lo, hi := 50*time.Microsecond, 5*time.Millisecond
	if rand.IntN(2) == 0 {
		hi = 50 * time.Millisecond
	}
	return time.Duration(float64(lo) * math.Pow(float64(hi)/float64(lo), rand.Float64()))
}

// noDoubleGrantVerdict checks the records and returns the number of
// overlapping pairs (with the lease ending last before each) and of token
// regressions, failing t for each with both grants named.
func noDoubleGrantVerdict(t *testing.T, grants []grantRecord) (overlaps, regressions int) {
	t.Helper()
	for _, g := range grants {
		if limit := g.granted.Add(noDoubleGrantTTL); g.deadline.After(limit) {
			t.Errorf("Deadline %v beyond the TTL from the Lock's return: %v", g.deadline.Sub(limit), g)
		}
		if g.granted.Sub(g.start) <= quickBound && g.deadline.After(g.start.Add(noDoubleGrantTTL)) {
			t.Errorf("Deadline beyond the Lock call's start + TTL: %v", g)
		}
	}
	// A lease whose deadline had passed when its Lock returned was never
	// held as far as its caller could tell: leave it out of the order.
	live := slices.DeleteFunc(slices.Clone(grants), func(g grantRecord) bool { return !g.granted.Before(g.end()) })
	slices.SortFunc(live, func(a, b grantRecord) int { return a.granted.Compare(b.granted) })
	var last *grantRecord // the lease, among those before, that ends last
	for i := range live {
		g := &live[i]
		if last != nil && g.granted.Before(last.end()) {
			overlaps++
			if overlaps <= 5 {
				t.Errorf("two holders at once for %v: %v and %v", last.end().Sub(g.granted), *last, *g)
			}
		}
		if i > 0 && g.token <= live[i-1].token {
			regressions++
			if regressions <= 5 {
				t.Errorf("token %d granted after %d: %v after %v", g.token, live[i-1].token, *g, live[i-1])
			}
		}
		if last == nil || g.end().After(last.end()) {
			last = g
		}
	}
	return overlaps, regressions
}
