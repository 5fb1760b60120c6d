package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// testSemaphoreAppliedAfterTimeout is AppliedAfterTimeout for a semaphore.
// The Mutex contests never reach a driver's AnyAcquirer, which a semaphore
// takes its permits through: an AcquireAny that, when its context ends with
// its request in flight, returns without giving back the grant (requirement
// 2 asks it to release every request's ID) would pass them all.
//
// Clients whose every request reaches the backend late contend for the
// permits of one semaphore with short, random deadlines, so that callers
// give up before their request arrives (an orphan, which only its TTL
// frees) and while it is in the driver (where the driver must give back a
// grant it may have got). The holds are judged as SemaphoreBound's; then,
// once every late request has landed, each of the semaphore's locks must
// be free within a TTL. A grant the driver forgot on a connection or a
// session that stays alive beside it stays taken past that.
//
// It runs on drivers without an AnyAcquirer too, where a semaphore tries
// its permits one Acquire at a time: the bound, the orphans and the
// deadlines apply to it all the same, and no other case contends for a
// semaphore with requests applied after their caller gave up.
func testSemaphoreAppliedAfterTimeout(t *T, e *env) {
	rtt := roundTrip(t, e)
	late := &lateDelivery{lag: rtt}
	t.Cleanup(late.wait) // registered first, so it runs after the clients close
	key := semaphoreContest(t, e, rtt, late)
	late.wait()
	t.Logf("%d requests were applied after their caller gave up", late.applied())
	probe := e.client(t)
	for _, k := range permitKeys(key, latePermits) {
		expectFreeWithin(t, e, e.mutex(t, probe, k), "after every late request had landed (a permit granted to a caller that is gone must expire, and a driver gives back what it may have been granted when its caller gives up)")
	}

	// Then one of each for sure, on a free semaphore: the requests that
	// take permits (AcquireAny, or each permit's Acquire) take a fifth of a
	// TTL to arrive, the gate's go straight to the driver, and the caller
	// gives up at a tenth. A TryAcquire leaves a permit granted to nobody;
	// so does an Acquire, once it holds the gate.
	late = &lateDelivery{lag: e.ttl / 5, exact: true}
	t.Cleanup(late.wait)
	key = e.key("semaphore-late-orphan")
	s := e.semaphore(t, e.client(t, gateStraight(withFault(late))), key, latePermits)
	giveUp := func(what string, take func(ctx context.Context) (dlock.Lease, error)) {
		before := late.applied()
		ctx, cancel := contextWithTimeout(t, e.ttl/10)
		defer cancel()
		if l, err := take(ctx); err != context.DeadlineExceeded {
			if err == nil {
				_ = l.Unlock(t.Context())
			}
			t.Fatalf("%s whose context ended before its request arrived: got %v, want exactly context.DeadlineExceeded", what, err)
		}
		late.wait()
		t.Logf("%s: %d request(s) applied after it gave up", what, late.applied()-before)
		for _, k := range permitKeys(key, latePermits) {
			expectFreeWithin(t, e, e.mutex(t, probe, k), "after a late "+what+" had landed")
		}
	}
	giveUp("TryAcquire", s.TryAcquire)
	giveUp("Acquire", s.Acquire)
}

// latePermits is how many permits the semaphore of
// SemaphoreAppliedAfterTimeout has: fewer than its contenders, so that they
// contend, and more than one, so that AcquireAny has a choice to make.
const latePermits = 3

// gateStraight returns a wrapper that sends the Acquires of semaphores'
// gates to the driver itself and every other call through wrap's driver:
// a fault then reaches only the requests that take permits, and a waiting
// Acquire holds the gate before its first try for a permit.
func gateStraight(wrap func(driver.Driver) driver.Driver) func(driver.Driver) driver.Driver {
	return func(inner driver.Driver) driver.Driver {
		return gateBypass{Driver: wrap(inner), inner: inner}
	}
}

// gateBypass is what gateStraight makes: Capabilities, Close and the
// optional behaviours are the wrapped driver's.
type gateBypass struct {
	driver.Driver
	inner driver.Driver
}

func (d gateBypass) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	if strings.HasSuffix(req.Key, "/gate") {
		return d.inner.Acquire(ctx, req)
	}
	return d.Driver.Acquire(ctx, req)
}

// semaphoreContest runs 3 clients with 3 goroutines each, every request of
// every client delivered late by late, on one semaphore of latePermits,
// for contestLength (stretched, as contestWithDeadlines's, until it has
// judged minContestGrants grants). Each goroutine takes a permit with
// TryAcquire one time in three and with Acquire otherwise, with a deadline
// from a tenth of a round trip to several for a quarter of them, and to two
// TTLs for the others: an orphan holds a permit or the gate for a TTL, and
// quick give-ups make many (with half of them quick, on the memory driver,
// orphans held the permits most of the time and the holders never reached
// the bound). It holds the permit up to a hundredth of the TTL, so
// that holds overlap, and gives it back. Verdict as SemaphoreBound's
// (permitHolds.judge), and no permit found gone before its lease's
// Deadline. It returns the key.
func semaphoreContest(t *T, e *env, rtt time.Duration, late *lateDelivery) string {
	const clients, workers = 3, 3
	longest := 2 * e.ttl
	length := contestLength(t)
	key := e.key("semaphore-late")

	var (
		ph                        permitHolds
		mu                        sync.Mutex
		grants, refused, timeouts int
		tryGrants, losses         int
		errs                      []error // the first few
		errCount                  int
		began                     = time.Now()
		end, stretchEnd           = began.Add(length), began.Add(maxContestStretch * length)
	)
	// Errors other than timeouts and refusals are logged and counted, not
	// failures, as in contestWithDeadlines: the verdict is about safety.
	note := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errCount++
		if len(errs) < 10 {
			errs = append(errs, err)
		}
	}
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
		return grants >= minContestGrants
	}
	var wg sync.WaitGroup
	for c := range clients {
		s := e.semaphore(t, e.client(t, withFault(late)), key, latePermits)
		for w := range workers {
			wg.Go(func() {
				for !over() && t.Context().Err() == nil {
					ctx, cancel := context.WithTimeout(t.Context(), spread(rtt, 8*rtt))
					if rand.N(4) != 0 {
						ctx, cancel = context.WithTimeout(t.Context(), spread(rtt, longest))
					}
					try := rand.N(3) == 0
					take := s.Acquire
					if try {
						take = s.TryAcquire
					}
					start := time.Now()
					l, err := take(ctx)
					dl, _ := ctx.Deadline()
					expired := ctx.Err() != nil || !time.Now().Before(dl)
					cancel()
					switch {
					case err == nil:
					case try && errors.Is(err, dlock.ErrLocked):
						mu.Lock()
						refused++
						mu.Unlock()
						continue
					case expired && err == context.DeadlineExceeded:
						mu.Lock()
						timeouts++
						mu.Unlock()
						continue
					case t.Context().Err() != nil:
						continue
					case expired:
						note(fmt.Errorf("client %d goroutine %d: a take whose context had ended: got %w, want exactly context.DeadlineExceeded", c, w, err))
						continue
					default:
						note(fmt.Errorf("client %d goroutine %d: %w", c, w, err))
						continue
					}
					h := watch(l, c, w, start)
					time.Sleep(time.Duration(rand.Int64N(int64(e.ttl / 100))))
					lost, err := giveBack(t, &ph, h)
					mu.Lock()
					grants++
					if try {
						tryGrants++
					}
					if lost {
						losses++
					}
					mu.Unlock()
					if err != nil && t.Context().Err() == nil {
						note(fmt.Errorf("client %d goroutine %d: Unlock: %w", c, w, err))
					}
				}
			})
		}
	}
	wg.Wait()
	ran := time.Since(began).Round(time.Millisecond)
	for _, err := range errs {
		t.Logf("error (not a failure): %v", err)
	}
	ph.judge(t, e, latePermits)
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%v with 3 clients x 3 goroutines on %d permits, round trip %v: %d grants (%d by TryAcquire), %d TryAcquires refused, %d timeouts, %d losses, %d other errors",
		ran, latePermits, rtt, grants, tryGrants, refused, timeouts, losses, errCount)
	if grants == 0 {
		t.Errorf("no permit was granted in %v", ran)
	}
	return key
}

// giveBack unlocks a watched permit and records its hold in ph, as
// permitHolds.unlock does, except that an error other than a loss is
// returned for the contest to count rather than failing the case; and it
// notes, as contestWithDeadlines does for judge, how long before its
// Deadline an Unlock found the permit gone. It reports whether the permit
// was lost.
func giveBack(t *T, ph *permitHolds, w *held) (lost bool, err error) {
	lost = w.l.Err() != nil
	deadline := w.l.Deadline() // as renewed so far
	w.h.end = earliest(time.Now(), deadline)
	err = w.l.Unlock(t.Context())
	if lost {
		w.h.end = earliest(w.h.end, <-w.ended)
	}
	if errors.Is(err, dlock.ErrLockLost) {
		w.h.goneEarly = max(w.h.goneEarly, time.Until(deadline))
		lost, err = true, nil
	}
	ph.record(w)
	return lost, err
}

// record adds a watched permit's hold, ended already, to its permit's.
func (p *permitHolds) record(w *held) {
	hs := p.of(w.l.Key())
	hs.mu.Lock()
	hs.all = append(hs.all, w.h)
	hs.mu.Unlock()
}
