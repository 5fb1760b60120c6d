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

// Locker is the Locker of key for one contender of its own (a random id):
// try, and sleep Retry after each failure, until ctx ends.
func (p *Poller) Locker(key string) Locker {
	id := rand.Text()
	return LockerFunc(func(ctx context.Context) (func(context.Context) error, error) {
		for {
			ok, err := p.Try(ctx, key, id)
			if err != nil {
				return nil, err
			}
			if ok {
				return func(ctx context.Context) error { return p.Release(ctx, key, id) }, nil
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(p.Retry):
			}
		}
	})
}

// MeasurePolledContended is MeasureContended for the target's Poller: goroutines
// lock and unlock one key through it as fast as they can for d.
func MeasurePolledContended(ctx context.Context, p *Poller, goroutines int, d time.Duration) (Contended, error) {
	key := newKey("polled")
	ls := make([]Locker, goroutines)
	for g := range ls {
		ls[g] = p.Locker(key)
	}
	return MeasureContendedLockers(ctx, ls, 1, d, nil)
}
