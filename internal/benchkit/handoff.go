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
	key := newKey("handoff")
	var (
		released  atomic.Int64 // when the latest holder called Unlock, in ns since start
		remaining atomic.Int64
		mu        sync.Mutex
		handoffs  []time.Duration
		firstErr  error
		wg        sync.WaitGroup
	)
	remaining.Store(int64(rounds))
	start := time.Now()
	r0 := t.requests()
	for g := range waiters + 1 {
		m, err := cs[g%clients].Mutex(key)
		if err != nil {
			return Handoff{}, err
		}
		wg.Go(func() {
			for remaining.Add(-1) >= 0 {
				l, err := m.Lock(ctx)
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
				if r := released.Load(); r > 0 {
					mu.Lock()
					handoffs = append(handoffs, time.Since(start)-time.Duration(r))
					mu.Unlock()
				}
				spin(holdFor)
				released.Store(int64(time.Since(start)))
				_ = l.Unlock(ctx)
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return Handoff{}, firstErr
	}
	return Handoff{
		Waiters:  waiters,
		Clients:  clients,
		Latency:  summarize(handoffs),
		Requests: float64(t.requests()-r0) / float64(rounds),
	}, nil
}

// spin holds the CPU for d, where a sleep would oversleep by a timer tick.
func spin(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}
