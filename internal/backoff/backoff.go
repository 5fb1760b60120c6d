// Package backoff spaces the retries of the drivers' own loops (a read that
// failed during a reconnect, a poll of a lock that cannot be waited for on
// the server): exponential, and jittered so that the clients of many
// processes spread out instead of retrying in lockstep.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Jittered is an exponential backoff from First, doubling up to Limit; each
// delay is drawn uniformly from the upper half of its step. Its zero steps
// start at First; it is not safe for concurrent use.
type Jittered struct {
	First, Limit time.Duration
	step         time.Duration
}

// Sleep waits for the next delay, or until ctx ends (returning ctx's error)
// or done is closed (returning context.Canceled; a nil done never is).
func (b *Jittered) Sleep(ctx context.Context, done <-chan struct{}) error {
	if b.step == 0 {
		b.step = b.First
	}
	d := b.step/2 + rand.N(b.step/2+1)
	b.step = min(2*b.step, b.Limit)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-done:
		return context.Canceled
	}
}
