package conformance

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// randomDeadlinesEnv lengthens the contests (RandomDeadlines,
// AppliedAfterTimeout, SemaphoreAppliedAfterTimeout, LateNotifications: a
// Go duration, e.g. 60s), for long runs per driver.
const randomDeadlinesEnv = "DLOCK_RANDOM_DEADLINES"

// defaultContestLength is how long the contest runs when the environment
// does not say: a few seconds, since the suite runs on every backend.
const defaultContestLength = 2 * time.Second

// A contest goes on past its length until it has judged minContestGrants
// grants, since a slow backend or a loaded machine grants few per second
// and a broken driver shows only in some of them; it stops at
// maxContestStretch times its length regardless.
const (
	minContestGrants  = 200
	maxContestStretch = 5
)

func testRandomDeadlines(t *T, e *env) {
	contestWithDeadlines(t, e, "deadlines", contest{})
}

// testAppliedAfterTimeout runs the contest with every request of every
// client delivered late, some after their caller gave up; a lock granted to
// a caller that is gone must be freed by its TTL.
func testAppliedAfterTimeout(t *T, e *env) {
	rtt := roundTrip(t, e)
	late := &lateDelivery{lag: rtt}
	t.Cleanup(late.wait) // registered first, so it runs after the clients close
	// An orphan holds the lock for a TTL: some Locks wait that long.
	key := contestWithDeadlines(t, e, "late", contest{wrap: withFault(late), longestLock: 2 * e.ttl})
	late.wait()
	t.Logf("%d requests were applied after their caller gave up", late.applied())
	other := e.mutex(t, e.client(t), key)
	expectFreeWithin(t, e, other, "after every late request had landed (a grant whose caller is gone must expire)")

	// Then one of each kind for sure, on a free lock: each request takes
	// a fifth of a TTL to arrive, and its caller gives up long before.
	late = &lateDelivery{lag: e.ttl / 5, exact: true}
	t.Cleanup(late.wait)
	key = e.key("late-orphan")
	m, other := e.mutex(t, e.client(t, withFault(late)), key), e.mutex(t, e.client(t), key)
	giveUp := func(what string, call func(ctx context.Context) error) {
		ctx, cancel := contextWithTimeout(t, e.ttl/50)
		defer cancel()
		if err := call(ctx); err != context.DeadlineExceeded {
			t.Fatalf("%s whose context ended before its request arrived: got %v, want exactly context.DeadlineExceeded", what, err)
		}
		late.wait()
		expectFreeWithin(t, e, other, "after a late "+what+" had landed")
	}
	giveUp("TryLock", func(ctx context.Context) error { _, err := m.TryLock(ctx); return err })
	giveUp("Lock", func(ctx context.Context) error { _, err := m.Lock(ctx); return err })
	l := lock(t, m)
	giveUp("Extend", func(ctx context.Context) error {
		err := l.Extend(ctx)
		if errors.Is(err, context.DeadlineExceeded) {
			err = l.Unlock(ctx)
		}
		return err
	})
}

// expectFreeWithin checks that m can be taken within the TTL and a margin,
// and gives it back.
func expectFreeWithin(t *T, e *env, m dlock.Mutex, why string) {
	ctx, cancel := contextWithTimeout(t, e.ttl+e.slack)
	defer cancel()
	l, err := m.Lock(ctx)
	if err != nil {
		held := ""
		if in := e.driver(t).Capabilities().Inspector; in != nil {
			info, ierr := in.Inspect(t.Context(), m.Key())
			held = fmt.Sprintf(" (Inspect: %+v, %v)", info, ierr)
		}
		t.Fatalf("Lock(%q): got %v, want the lock within TTL plus a margin %s%s", m.Key(), err, why, held)
	}
	unlock(t, l)
}

// contestLength is how long a contest runs.
func contestLength(t *T) time.Duration {
	d, err := contestLengthFromEnv()
	if err != nil {
		t.Fatalf("%v", err)
	}
	return d
}

func contestLengthFromEnv() (time.Duration, error) {
	s := os.Getenv(randomDeadlinesEnv)
	if s == "" {
		return defaultContestLength, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive duration such as 60s", randomDeadlinesEnv, s)
	}
	return d, nil
}

// roundTrip measures one uncontended TryLock and Unlock, the lowest of a few.
func roundTrip(t *T, e *env) time.Duration {
	m := e.mutex(t, e.client(t), e.key("rtt"))
	best := time.Duration(math.MaxInt64)
	for range 5 {
		start := time.Now()
		l := lock(t, m)
		took := time.Since(start)
		unlock(t, l)
		best = min(best, took)
	}
	return max(best, 20*time.Microsecond)
}

// spread draws a deadline log-uniformly from a tenth of a round trip to
// longest: many end while a request is in flight, a few outlast a wait.
func spread(rtt, longest time.Duration) time.Duration {
	lo, hi := math.Log(float64(rtt)/10), math.Log(float64(longest))
	return time.Duration(math.Exp(lo + rand.Float64()*(hi-lo)))
}

// contest says how contestWithDeadlines runs.
type contest struct {
	// wrap, if set, wraps every client's driver.
	wrap func(driver.Driver) driver.Driver
	// longestLock is the longest Lock deadline; by default 20 round trips
	// or a quarter of the TTL, whichever is longer, so that some Locks
	// outlast the grants that raced with the cancellations before them.
	longestLock time.Duration
}

// hold is one lease as its holder saw it, on this process's monotonic clock.
type hold struct {
	client, worker int
	token          uint64
	start          time.Time // of the Lock call
	granted        time.Time // when Lock returned
	deadline       time.Time // the lease's Deadline when granted
	end            time.Time // when the holder stopped trusting it: Unlock's start, the deadline, or the loss report
	// goneEarly is how long before its Deadline an Extend or Unlock of the
	// lease found the lock gone (ErrLockLost), if one did; zero otherwise.
	goneEarly time.Duration
}

func (h hold) String() string {
	return fmt.Sprintf("client %d goroutine %d token %d (Lock began %v, returned +%v, trusted until +%v, deadline +%v)",
		h.client, h.worker, h.token, h.start.Format("15:04:05.000000"), h.granted.Sub(h.start), h.end.Sub(h.start), h.deadline.Sub(h.start))
}

// contestWithDeadlines runs 3 clients with 4 goroutines each on one key for
// contestLength: every Lock has a deadline from a tenth of a round trip to
// several (or, for half of them, to the longest Lock deadline), and one
// Unlock in 32 one from a tenth to 8; holders hold a few hundred µs.
// A holder in four also extends its lease, with a short deadline too.
// Verdict: never two leases both trusted at once, tokens strictly rising in
// grant order, and no Deadline later than the TTL after its Lock returned.
// It returns the key.
func contestWithDeadlines(t *T, e *env, name string, how contest) string {
	const clients, workers = 3, 4
	rtt := roundTrip(t, e)
	longest := how.longestLock
	if longest == 0 {
		longest = max(20*rtt, e.ttl/4)
	}
	length := contestLength(t)
	key := e.key(name)

	var (
		mu                                   sync.Mutex
		holds                                []hold
		lockTimeouts, unlockTimeouts, losses int
		extends, extendTimeouts              int
		errs                                 []error // the first few
		errCount                             int
	)
	// Errors other than timeouts are logged and counted, not failures:
	// the verdict is about safety, and a loaded machine makes backends
	// return transient errors (which Lock does not yet ride out).
	note := func(err error) { // with mu held
		errCount++
		if len(errs) < 10 {
			errs = append(errs, err)
		}
	}
	failure := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		note(err)
	}
	began := time.Now()
	end := began.Add(length)
	stretchEnd := began.Add(maxContestStretch * length)
	over := func() bool {
		now := time.Now()
		switch {
		case now.Before(end):
			return false
		case !now.Before(stretchEnd):
			return true
		}
		mu.Lock()
		defer mu.Unlock()
		return len(holds) >= minContestGrants
	}
	var wg sync.WaitGroup
	for c := range clients {
		var cl *dlock.Client
		if how.wrap != nil {
			cl = e.client(t, how.wrap)
		} else {
			cl = e.client(t)
		}
		m := e.mutex(t, cl, key)
		for w := range workers {
			wg.Go(func() {
				for !over() && t.Context().Err() == nil {
					// Half the Locks end within a few round trips, many of
					// them with a request in flight; the others may wait.
					ctx, cancel := context.WithTimeout(t.Context(), spread(rtt, 8*rtt))
					if rand.N(2) == 0 {
						ctx, cancel = context.WithTimeout(t.Context(), spread(rtt, longest))
					}
					start := time.Now()
					l, err := m.Lock(ctx)
					dl, _ := ctx.Deadline()
					expired := ctx.Err() != nil || !time.Now().Before(dl)
					cancel()
					switch {
					case err == nil:
					case expired && err == context.DeadlineExceeded:
						mu.Lock()
						lockTimeouts++
						mu.Unlock()
						continue
					case t.Context().Err() != nil:
						continue
					case expired:
						failure(fmt.Errorf("client %d goroutine %d: Lock whose context had ended: got %w, want exactly context.DeadlineExceeded", c, w, err))
						continue
					default:
						failure(fmt.Errorf("client %d goroutine %d: Lock: %w", c, w, err))
						continue
					}
					h := hold{client: c, worker: w, token: l.Token(), start: start, granted: time.Now(), deadline: l.Deadline()}
					ended := make(chan time.Time, 1)
					go func() { <-l.Done(); ended <- time.Now() }()
					time.Sleep(time.Duration(rand.Int64N(int64(300 * time.Microsecond))))
					if rand.N(4) == 0 {
						ectx, ecancel := context.WithTimeout(t.Context(), spread(rtt, 8*rtt))
						deadline := l.Deadline()
						err := l.Extend(ectx)
						ecancel()
						mu.Lock()
						switch {
						case err == nil:
							extends++
						case errors.Is(err, context.DeadlineExceeded):
							extendTimeouts++
						case errors.Is(err, dlock.ErrLockLost):
							h.goneEarly = max(h.goneEarly, time.Until(deadline))
						default:
							if t.Context().Err() == nil {
								note(fmt.Errorf("client %d goroutine %d: Extend: %w", c, w, err))
							}
						}
						mu.Unlock()
					}
					uctx, ucancel := context.WithCancel(t.Context())
					// One Unlock in 32 has a short deadline: one that ends
					// with the release in flight leaves the lock taken until
					// its TTL, which stalls the contest.
					if rand.N(32) == 0 {
						uctx, ucancel = context.WithTimeout(t.Context(), spread(rtt, 8*rtt))
					}
					lost := l.Err() != nil
					deadline := l.Deadline() // as renewed so far
					h.end = earliest(time.Now(), deadline)
					err = l.Unlock(uctx)
					ucancel()
					if errors.Is(err, dlock.ErrLockLost) {
						h.goneEarly = max(h.goneEarly, time.Until(deadline))
					}
					if lost {
						h.end = earliest(h.end, <-ended)
					}
					mu.Lock()
					holds = append(holds, h)
					switch {
					case err == nil:
					case errors.Is(err, context.DeadlineExceeded):
						unlockTimeouts++
					case errors.Is(err, dlock.ErrLockLost):
						losses++
					default:
						if t.Context().Err() == nil {
							note(fmt.Errorf("client %d goroutine %d: Unlock: %w", c, w, err))
						}
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	ran := time.Since(began).Round(time.Millisecond)
	for _, err := range errs {
		t.Logf("error (not a failure): %v", err)
	}
	v := judge(t, e, holds)
	t.Logf("%v with 3 clients x 4 goroutines, round trip %v: %d grants, %d Lock timeouts, %d Extends (%d timed out), %d Unlock timeouts, %d losses (%d before the Deadline), %d other errors, %d deadlines past Lock's return+TTL, %d overlaps, %d token regressions",
		ran, rtt, len(holds), lockTimeouts, extends, extendTimeouts, unlockTimeouts, losses, v.goneEarly, errCount, v.late, v.overlaps, v.regressions)
	if len(holds) == 0 {
		t.Errorf("no Lock succeeded in %v", ran)
	}
	expectFreeWithin(t, e, e.mutex(t, e.client(t), key), "after the contest (cancelled and timed-out calls leave nothing behind)")
	return key
}

// verdict counts what judge found wrong.
type verdict struct {
	overlaps, regressions, late, goneEarly int
}

// judge checks the holds: no Deadline past its Lock's return plus the TTL,
// no two holds trusted at once, tokens strictly rising in grant order, and
// no lock found gone before its lease's Deadline. A hold's interval is
// [granted, end): it is observed late and ended early, so an overlap found
// is one that was.
//
// The last is the Deadline's own promise: until then the backend keeps the
// lock for its holder, so an Extend or Unlock told ErrLockLost before it
// means that someone else could have been granted the lock meanwhile, even
// when nobody happened to take it in that window (a stale grant trusted,
// an expiry shorter than the validity claimed). The cases that judge
// inject no fault that frees a lock early (no restart, no partition).
//
// Validity is counted from the start of the driver call that granted, which
// the suite does not see: it began after Lock began and before Lock returned.
// Lock's start is no bound: a Lock may wait, and under load one may start
// its granting call well after its context's deadline, before the timer
// that ends the context has run.
func judge(t *T, e *env, holds []hold) (v verdict) {
	const shown = 5
	for _, h := range holds {
		if over := h.deadline.Sub(h.granted.Add(e.ttl)); over > 0 {
			if v.late++; v.late <= shown {
				t.Errorf("deadline %v later than the TTL after Lock returned: %v", over, h)
			}
		}
		if h.goneEarly > 0 {
			if v.goneEarly++; v.goneEarly <= shown {
				t.Errorf("the lock was found gone (ErrLockLost) %v before the lease's Deadline: %v", h.goneEarly, h)
			}
		}
	}
	// A lease whose deadline had passed by the time its Lock returned was
	// never trusted: it holds nothing, and says nothing about order.
	trusted := slices.DeleteFunc(slices.Clone(holds), func(h hold) bool { return !h.granted.Before(h.end) })
	slices.SortFunc(trusted, func(a, b hold) int { return a.granted.Compare(b.granted) })
	var longest, highest *hold // of the holds granted so far: the one trusted longest, the one with the highest token
	for i := range trusted {
		h := &trusted[i]
		if longest != nil && h.granted.Before(longest.end) {
			if v.overlaps++; v.overlaps <= shown {
				t.Errorf("two holders at once:\n\t%v\n\t%v", longest, h)
			}
		}
		if highest != nil && h.token != 0 && h.token <= highest.token {
			if v.regressions++; v.regressions <= shown {
				t.Errorf("fencing token not above an earlier grant's:\n\t%v\n\tthen %v", highest, h)
			}
		}
		if longest == nil || h.end.After(longest.end) {
			longest = h
		}
		if highest == nil || h.token > highest.token {
			highest = h
		}
	}
	return v
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
