package benchkit

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Handoff is how fast a released lock reaches a blocked waiter.
type Handoff struct {
	Waiters  int     `json:"waiters"`
	Clients  int     `json:"clients"`
	Latency  Latency `json:"latency"`  // from the holder's Unlock call to the next Lock returning
	Requests float64 `json:"requests"` // backend requests per critical section
}

// holdFor is how long each holder keeps the lock, so that the others are
// really blocked in Lock when it is released.
const holdFor = 200 * time.Microsecond

// MeasureHandoff has waiters+1 goroutines, spread over clients clients
// (clients=1: all in one process, the core coalesces them), pass one lock
// around rounds times, and times each handoff.
func MeasureHandoff(ctx context.Context, t Target, waiters, clients, rounds int) (Handoff, error) {
	cs, done, err := t.clients(ctx, clients)
	if err != nil {
		return Handoff{}, err
	}
	defer done()
	ls, err := mutexLockers(cs, newKey("handoff"), waiters+1)
	if err != nil {
		return Handoff{}, err
	}
	return MeasureHandoffLockers(ctx, ls, HandoffOptions{Clients: clients, Rounds: rounds, Requests: t.Requests})
}

// HandoffOptions sets a run of MeasureHandoffLockers.
type HandoffOptions struct {
	// Clients is how many independent clients the lockers are spread
	// over, for the report.
	Clients int
	// Rounds is how many grants the run makes at most.
	Rounds int
	// Limit, when not 0, ends the run once it has passed and a handoff was
	// timed (for polling locks, whose handoffs can take their retry delay).
	Limit time.Duration
	// Hold is how long each holder keeps the lock once every other
	// goroutine has called Lock: long enough for their first requests to
	// reach the backend, so that they are really waiting when it is
	// released. Zero: 200 µs, spun (a sleep would oversleep by a timer
	// tick); longer holds sleep.
	Hold time.Duration
	// Requests, when not nil, counts the backend's requests
	// (Handoff.Requests).
	Requests func() uint64
}

// MeasureHandoffLockers has a goroutine per locker (all but one are the
// waiters) pass one lock around, and times each handoff: from the holder's
// unlock call to the next Lock returning, as o sets.
//
// A goroutine that released the lock does not ask for it again until
// another has taken it: every handoff goes to a goroutine that was waiting,
// never back to the one that released it (a polling lock's releaser would
// otherwise win its own lock back at once, and the figure would be a round
// trip, not a handoff).
func MeasureHandoffLockers(ctx context.Context, lockers []Locker, o HandoffOptions) (Handoff, error) {
	var (
		released  atomic.Int64 // when the latest holder called unlock, in ns since start
		timed     atomic.Bool  // a handoff was timed
		remaining atomic.Int64
		mu        sync.Mutex
		asking    = sync.NewCond(&mu) // signalled when asking or ended changes
		inLock    int                 // goroutines that called Lock and have not got it yet, under mu
		ended     bool                // no round left to claim, or a Lock failed, under mu
		handoffs  []time.Duration
		grants    int
		granted   = make(chan struct{}) // closed and replaced at each grant
		stopped   = make(chan struct{}) // closed when the run ends
		stopOnce  sync.Once
		firstErr  error
		wg        sync.WaitGroup
	)
	runCtx, abort := context.WithCancel(ctx)
	defer abort()
	stop := func() {
		stopOnce.Do(func() {
			close(stopped)
			mu.Lock()
			ended = true
			asking.Broadcast()
			mu.Unlock()
		})
	}
	remaining.Store(int64(o.Rounds))
	start := time.Now()
	claim := func() bool {
		if remaining.Add(-1) < 0 || (o.Limit > 0 && time.Since(start) > o.Limit && timed.Load()) {
			stop()
			return false
		}
		return true
	}
	r0 := startCount(o.Requests)
	for _, l := range lockers {
		wg.Go(func() {
			for claim() {
				mu.Lock()
				inLock++
				asking.Broadcast()
				mu.Unlock()
				unlock, err := l.Lock(runCtx)
				mu.Lock()
				inLock--
				if err != nil {
					if firstErr == nil && ctx.Err() == nil {
						firstErr = err
					}
					mu.Unlock()
					abort()
					stop()
					return
				}
				if r := released.Load(); r > 0 {
					handoffs = append(handoffs, time.Since(start)-time.Duration(r))
					timed.Store(true)
				}
				grants++
				close(granted)
				granted = make(chan struct{})
				next := granted // closed by the grant after this one
				// Hold the lock until every other goroutine has asked
				// for it, then o.Hold more, so that it is released to
				// waiters really blocked in Lock: on a loaded machine a
				// goroutine can take longer than the hold to get there,
				// and a polling lock would then be timed taking a free
				// lock, not a handoff.
				for inLock < len(lockers)-1 && !ended {
					asking.Wait()
				}
				mu.Unlock()
				hold(o.Hold)
				released.Store(int64(time.Since(start)))
				_ = unlock(ctx)
				if len(lockers) == 1 {
					continue // nobody else to hand it to
				}
				select {
				case <-next:
				case <-stopped:
				}
			}
		})
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	if firstErr != nil {
		return Handoff{}, firstErr
	}
	return Handoff{
		Waiters:  len(lockers) - 1,
		Clients:  o.Clients,
		Latency:  summarize(handoffs),
		Requests: perSection(o.Requests, r0, grants),
	}, nil
}

// hold waits d: holdFor when d is 0, spun up to holdFor (where a sleep
// would oversleep by a timer tick), slept above.
func hold(d time.Duration) {
	switch {
	case d == 0:
		spin(holdFor)
	case d <= holdFor:
		spin(d)
	default:
		time.Sleep(d)
	}
}

// spin holds the CPU for d.
func spin(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}
