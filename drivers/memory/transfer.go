package memory

import (
	"context"
	"errors"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// errForeignLease: Transfer was given a lease another driver made.
var errForeignLease = errors.New("memory: lease not made by this driver")

// Transfer hands the exclusive lock from holds to the request to (only
// WithoutBlocking: a Blocking driver declares no Transferer), under the
// backend's lock: the lock is never free in between, and to's grant gets a
// new fencing token.
func (c *client) Transfer(ctx context.Context, from driver.Lease, to driver.Request) (driver.Lease, error) {
	if err := c.enter(ctx); err != nil {
		return nil, err
	}
	l := leaseOf(from)
	if l == nil || l.c != c {
		return nil, errForeignLease
	}
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	e, h := b.find(l.key, l.identity, l.token, l.mode, now)
	if h == nil {
		return nil, driver.ErrNotHeld
	}
	// Only a whole, plain exclusive hold moves: reentrant entries and read
	// locks are released the ordinary way.
	if l.mode != driver.Exclusive || l.reentrant || h.count > 1 || to.Key != l.key ||
		to.Mode != driver.Exclusive || to.Owner != "" {
		return nil, driver.ErrLocked
	}
	l.letGo() // the lock is no longer from's to lose
	e.exclusive = b.newHolder(to.Key, to.ID, to.Value, now.Add(to.TTL), c.o.tokenBlock)
	return c.newLease(to, e.exclusive), nil
}
