package benchkit

import (
	"context"
	"crypto/rand"
	"sync"
	"time"
)

// Poller is a lock the way libraries without notifications take it, over
// the raw client: one try, and on failure a fixed sleep before the next
// (redislock's LinearBackoff, redsync's retry delay). It is the baseline
// contended throughput is compared with, measured in the same run: such a
// lock's throughput comes from barging, the goroutine that just released
// taking the lock again while the others sleep.
type Poller struct {
	// Try takes key for id once, reporting whether it got it.
	Try func(ctx context.Context, key, id string) (bool, error)
	// Release gives key back if id still holds it.
	Release func(ctx context.Context, key, id string) error
	// Retry is the sleep after a failed try.
	Retry time.Duration
}

// MeasurePolledContended is MeasureContended for the target's Poller: goroutines
// lock and unlock one key through it as fast as they can for d.
func MeasurePolledContended(ctx context.Context, p *Poller, goroutines int, d time.Duration) (Contended, error) {
	key := newKey("polled")
	runCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	counts := make([]int, goroutines)
	waits := make([][]time.Duration, goroutines)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	fail := func(err error) {
		if runCtx.Err() == nil {
			mu.Lock()
			firstErr = err
			mu.Unlock()
		}
	}
	start := time.Now()
	for g := range goroutines {
		wg.Go(func() {
			id := rand.Text()
			for runCtx.Err() == nil {
				t0 := time.Now()
				for {
					ok, err := p.Try(runCtx, key, id)
					if err != nil {
						fail(err)
						return
					}
					if ok {
						break
					}
					select {
					case <-runCtx.Done():
						return
					case <-time.After(p.Retry):
					}
				}
				waits[g] = append(waits[g], time.Since(t0))
				counts[g]++
				if err := p.Release(context.WithoutCancel(runCtx), key, id); err != nil {
					fail(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return Contended{}, firstErr
	}
	return contendedStats(goroutines, 1, counts, waits, time.Since(start)), nil
}
