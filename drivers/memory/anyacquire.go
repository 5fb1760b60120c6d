package memory

import (
	"context"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// AcquireAny grants the first of reqs whose lock is free, under the
// backend's lock, exactly as Acquire would grant it
// (driver.AnyAcquirer); when every lock is held it reports the soonest
// expiry among their holders.
func (c *client) AcquireAny(ctx context.Context, reqs []driver.Request) (driver.Lease, int, error) {
	if err := c.enter(ctx); err != nil {
		return nil, 0, err
	}
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	now := time.Now()
	var soonest time.Duration
	for i, req := range reqs {
		h, left := c.b.grant(req, now, c.o.tokenBlock, nil)
		if h != nil {
			return c.newLease(req, h), i, nil
		}
		if left > 0 && (soonest == 0 || left < soonest) {
			soonest = left
		}
	}
	return nil, 0, &driver.LockedError{RetryAfter: soonest}
}
