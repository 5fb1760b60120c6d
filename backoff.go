package dlock

import (
	"context"
	"math/rand/v2"
	"time"
)

// backoff yields the delays between acquisition attempts: exponential from
// min to max, each drawn uniformly from [d/2, d] so that waiters of many
// processes spread out instead of retrying in lockstep.
type backoff struct {
	min, max, cur time.Duration
}

func newBackoff(minDelay, maxDelay time.Duration) *backoff {
	return &backoff{min: minDelay, max: maxDelay, cur: minDelay}
}

// next returns the next delay. retryAfter, when positive, is the holder's
// remaining TTL: there is no point waking much before it (the holder may
// still release early, which a notification or a later poll catches), and
// sleeping past it would waste the handoff, so the delay is capped just after
// it.
func (b *backoff) next(retryAfter time.Duration) time.Duration {
	d := b.cur
	b.cur = min(b.cur*2, b.max)
	d = d/2 + rand.N(d/2+1)
	if retryAfter > 0 {
		d = min(d, retryAfter+time.Millisecond)
	}
	return d
}

// reset starts the sequence again, after a notification made progress likely.
func (b *backoff) reset() { b.cur = b.min }

// cleanupContext returns a context for giving a lock back after ctx ended or
// failed: not cancelled with ctx, but bounded by ttl, after which the backend
// frees the lock by itself anyway.
func cleanupContext(ctx context.Context, ttl time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), ttl)
}
