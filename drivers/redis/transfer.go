package redis

import (
	"context"
	"fmt"

	"github.com/dlock-go/dlock/driver"
)

// Transfer hands an exclusive lock from its holder to the request to in one
// script (transferScript): one round trip where a release and an
// acquisition take two, and no wake-up for other clients' waiters, since
// the lock is never free. The new hold stores to.Value (from's value goes
// with from's hold).
//
// A transfer whose reply is lost may have happened: the core then retries
// Acquire with to's ID, which acquireScript grants again to the hold it
// finds with that ID.
func (d *Driver) Transfer(ctx context.Context, from driver.Lease, to driver.Request) (driver.Lease, error) {
	if err := d.enter(ctx); err != nil {
		return nil, err
	}
	l, ok := from.(*lease)
	if !ok || l.d != d {
		return nil, errForeignLease
	}
	if namesOf(d.prefix, to.Key) != l.names || to.Mode != driver.Exclusive || to.Owner != "" {
		return nil, driver.ErrLocked // not a plain exclusive request for the same lock
	}
	c, acked := d.ackedFor(to.TTL)
	res, err := transferScript.Run(ctx, c, []string{l.names.lock, l.names.fence()}, l.id, to.ID, millis(to.TTL), uint64(tokenBlock), to.Value).Int64Slice()
	if err != nil {
		return nil, d.callErr(ctx, err)
	}
	if len(res) != 2 {
		return nil, fmt.Errorf("redis: transfer script returned %d values, want 2", len(res))
	}
	switch res[0] {
	case 0:
		return nil, driver.ErrNotHeld
	case 2:
		return nil, driver.ErrLocked
	}
	if err := acked.shortfall(); err != nil {
		// The outcome for a failover is unknown: the core releases the
		// old hold and recovers the new one by Acquire with to.ID, which
		// waits for the replicas again.
		return nil, err
	}
	nl := &lease{d: d, names: l.names, id: to.ID}
	nl.Start(uint64(res[1]), to.TTL)
	return nl, nil
}

// tokenBlock is how many fencing tokens each new plain exclusive grant
// reserves (Capabilities.TokenBlock): its own, and the next ones, which the
// core gives to the next goroutines of the same Client it hands the lock
// to, without a request. It is more than the core's handoffs in a row, so
// that every handoff inside a Client costs no request at all. Every later
// grant's token is past the block.
const tokenBlock = 16

// blockFor is how many tokens a grant for req reserves: a block for the
// locks the core can hand over (plain exclusive ones), one otherwise.
func blockFor(req driver.Request) uint64 {
	if req.Mode == driver.Exclusive && req.Owner == "" {
		return tokenBlock
	}
	return 1
}
