package benchkit

import (
	"context"
	"crypto/rand"
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
	ids := make([]string, goroutines)
	for g := range ids {
		ids[g] = rand.Text()
	}
	return contend(ctx, goroutines, 1, d, func(runCtx context.Context, g int) (func() error, error) {
		for {
			ok, err := p.Try(runCtx, key, ids[g])
			if err != nil {
				return nil, err
			}
			if ok {
				return func() error { return p.Release(context.WithoutCancel(runCtx), key, ids[g]) }, nil
			}
			select {
			case <-runCtx.Done():
				return nil, runCtx.Err()
			case <-time.After(p.Retry):
			}
		}
	})
}
