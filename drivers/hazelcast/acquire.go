package hazelcast

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// Acquire takes the lock req.Key for a new lock owner.
//
// Without req.Block it tries once: it takes the lock if no other owner
// holds it, without waiting, and returns driver.ErrLocked otherwise. A
// grant costs two round trips: the tryLock beside a read of the fencing
// counter, then the second hold beside the counter's compare-and-set (two
// more when the counter changed in between). Calls whose outcome the driver
// must learn are not abandoned when ctx ends: see calls.go; a grant that ctx
// outlived is given back before Acquire returns ctx's error.
//
// With req.Block it waits on the member until the lock is granted or ctx
// ends. The member queues waiters itself: Acquire asks it for the lock with a
// bounded wait (the wait slice, at most half of what the lease is sure to
// last and at most what is left of ctx) and asks again when a wait ends
// without the lock. While the client is disconnected, Acquire waits for it
// to reconnect. Cancelling ctx does not reach a member, so a wait
// the caller gave up on can still be granted: Acquire therefore keeps waiting
// for the member's answer to the wait under way, at most a slice, and gives
// back a lock granted meanwhile before it returns ctx's error. Nothing is
// left queued or held.
func (d *Driver) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	return d.acquire(ctx, req, req.Block)
}

// errLapsedGrant: the member granted the lock, but the grant could not be
// confirmed before its lease may have run out.
var errLapsedGrant = errors.New("hazelcast: the lock was granted, but its lease may have run out before the grant was confirmed")

func (d *Driver) acquire(ctx context.Context, req driver.Request, wait bool) (driver.Lease, error) {
	if err := d.enter(ctx); err != nil {
		return nil, err
	}
	if req.Mode != driver.Exclusive || req.Owner != "" {
		// The core never sends these to a driver whose Capabilities lack
		// Shared and Reentrant; refuse rather than grant a lock that would
		// not exclude as asked.
		return nil, fmt.Errorf("hazelcast: %s and reentrant locks are %w by this driver", req.Mode, errors.ErrUnsupported)
	}
	if err := checkTTL(req.TTL); err != nil {
		return nil, fmt.Errorf("hazelcast: TTL %w", err)
	}
	started := d.now()
	key := mapKey(req.Key)
	leaseDur := leaseTime(req.TTL)
	first := true
	for {
		if wait {
			if err := d.session.waitConnected(ctx); err != nil {
				return nil, d.callErr(ctx, err)
			}
		} else if !d.session.connectedNow() {
			return nil, d.callErr(ctx, errNotConnected)
		}
		lost := d.session.current() // before the grant is asked for: see session.go
		o := newOwner(req.ID)
		var slice time.Duration
		if wait {
			var err error
			if slice, err = d.slice(ctx, leaseDur); err != nil {
				return nil, err
			}
			// A request that waits is left unacknowledged by the
			// member: see nagle.go.
			d.nagle.beforeWait()
		}
		sent := d.now()
		// The first attempt reads the fencing counter beside the request
		// for the lock: when the lock is free, that saves a round trip.
		// Later ones follow waits, after which the read would often be
		// stale, and cost a request per slice.
		var early *fenceRead
		granted, err := d.grant(o, key, leaseDur, slice, first, &early)
		first = false
		if err != nil {
			d.abandon(o, key, leaseDur) // the grant may have happened
			return nil, d.callErr(ctx, err)
		}
		if !granted {
			if !wait {
				return nil, driver.ErrLocked
			}
			continue // d.slice returns ctx's error once it ended
		}
		token, err := d.settle(o, key, leaseDur, sent, early)
		if err == nil && ctx.Err() == nil && !d.closed.Load() {
			l := &lease{d: d, key: key, owner: o, lost: lost, holds: baseHolds, ttl: req.TTL}
			// The lock was granted no earlier than the call that sent this
			// wait: its lease runs from there.
			l.Start(token, validFor(req.TTL)+sent.Sub(started))
			return l, nil
		}
		d.abandon(o, key, leaseDur)
		switch {
		case err == nil:
			return nil, d.callErr(ctx, ctx.Err())
		case !errors.Is(err, errLapsedGrant):
			return nil, d.callErr(ctx, err)
		case !wait:
			return nil, driver.ErrLocked // nothing is left of the attempt
		}
		// Waiting: the lapsed grant is given back; wait again.
	}
}

// slice returns how long the next server-side wait lasts: the wait slice,
// at most half of what the lease surely lasts (so that a grant at the end of
// a wait is confirmed well within its lease), and at most what is left of
// ctx. It returns ctx's error when ctx has ended or has no time left.
func (d *Driver) slice(ctx context.Context, lease time.Duration) (time.Duration, error) {
	if err := d.enter(ctx); err != nil {
		return 0, err
	}
	s := min(d.waitSlice, validFor(lease)/2)
	if deadline, ok := ctx.Deadline(); ok {
		left := time.Until(deadline)
		if left <= 0 {
			<-ctx.Done()
			return 0, ctx.Err()
		}
		s = min(s, left)
	}
	// Whole milliseconds, Hazelcast's unit, and at least one: a zero wait
	// would not wait at all.
	return max(leaseTime(s), time.Millisecond), nil
}

// grant asks the member for the lock on key for o, with a lease of lease,
// waiting up to wait for other owners to let go. Its call is bounded by the
// wait plus the lease, not by the caller: see calls.go. With readEarly, it
// also reads key's fencing counter meanwhile, into *early.
func (d *Driver) grant(o *owner, key string, lease, wait time.Duration, readEarly bool, early **fenceRead) (bool, error) {
	call, cancel := d.callContext(wait + lease)
	defer cancel()
	lc, release := o.bind(call)
	defer release()
	if !readEarly {
		return d.api.tryLock(lc, key, lease, wait)
	}
	var r fenceRead
	var wg sync.WaitGroup
	wg.Go(func() { r = d.readFence(call, key) })
	granted, err := d.api.tryLock(lc, key, lease, wait)
	wg.Wait()
	*early = &r
	return granted, err
}

// settle completes a grant to o sent at sent: it enters the lock a second
// time (see "Hold counting" in lease.go) and advances the fencing counter
// (from early, when grant read it), both at once, and returns the token. It
// returns errLapsedGrant when the grant's lease may have run out before the
// second hold, which would then have been a fresh grant of one hold.
func (d *Driver) settle(o *owner, key string, lease time.Duration, sent time.Time, early *fenceRead) (uint64, error) {
	call, cancel := d.callContext(lease)
	defer cancel()
	lc, release := o.bind(call)
	defer release()

	var held bool
	var holdErr error
	var wg sync.WaitGroup
	wg.Go(func() { held, holdErr = d.api.tryLock(lc, key, lease, 0) })
	token, fenceErr := d.nextToken(call, key, early)
	wg.Wait()
	switch {
	case holdErr != nil:
		return 0, holdErr
	case !held || !d.within(sent, lease):
		// !held: the lease ran out and another owner took the lock.
		return 0, errLapsedGrant
	case fenceErr != nil:
		return 0, fenceErr
	}
	return token, nil
}
