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
	return MeasureHandoffLockers(ctx, ls, clients, rounds, 0, t.Requests)
}

// MeasureHandoffLockers has a goroutine per locker (all but one are the
// waiters) pass one lock around, and times each handoff: from the holder's
// unlock call to the next Lock returning. It stops after rounds grants, or,
// when limit is not 0, once limit has passed and a handoff was timed (for
// polling locks, whose handoffs can take their retry delay). clients is how many independent
// clients the lockers are spread over, for the report; requests, when not
// nil, counts the backend's requests (Handoff.Requests).
//
// A goroutine that released the lock does not ask for it again until
// another has taken it: every handoff goes to a goroutine that was waiting,
// never back to the one that released it (a polling lock's releaser would
// otherwise win its own lock back at once, and the figure would be a round
// trip, not a handoff).
func MeasureHandoffLockers(ctx context.Context, lockers []Locker, clients, rounds int, limit time.Duration, requests func() uint64) (Handoff, error) {
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
	remaining.Store(int64(rounds))
	start := time.Now()
	claim := func() bool {
		if remaining.Add(-1) < 0 || (limit > 0 && time.Since(start) > limit && timed.Load()) {
			stop()
			return false
		}
		return true
	}
	r0 := startCount(requests)
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
				// for it, then holdFor more, so that it is released to
				// waiters really blocked in Lock: on a loaded machine a
				// goroutine can take longer than holdFor to get there,
				// and a polling lock would then be timed taking a free
				// lock, not a handoff.
				for inLock < len(lockers)-1 && !ended {
					asking.Wait()
				}
				mu.Unlock()
				spin(holdFor)
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
		Clients:  clients,
		Latency:  summarize(handoffs),
		Requests: perSection(requests, r0, grants),
	}, nil
}

// spin holds the CPU for d, where a sleep would oversleep by a timer tick.
func spin(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}
