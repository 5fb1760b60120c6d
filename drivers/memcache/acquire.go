package memcache

import (
	"context"
	"errors"
	"fmt"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/dlock-go/dlock/driver"
)

// Acquire tries once to take the lock req.Key for req.ID by adding its lock
// item, and then draws a fencing token. When another owner holds the lock it returns a
// *driver.LockedError with the holder's expected remaining time, when known.
//
// gomemcache takes no context: each request is bounded by the client's
// Timeout, and ctx is checked between requests. When ctx ends while the lock
// was being granted, or a request fails after it may have added the lock
// item, the item is removed by req.ID before Acquire returns, so that no
// lock is left behind (a removal that cannot reach the server leaves the
// item to expire by its TTL).
func (d *Driver) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	done, err := d.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if req.Mode != driver.Exclusive || req.Owner != "" {
		// The core never sends these to a driver whose Capabilities lack
		// Shared and Reentrant; refuse rather than grant a lock that would
		// not exclude the way it was asked to.
		return nil, fmt.Errorf("memcached: %s and reentrant locks are %w by this driver", req.Mode, errors.ErrUnsupported)
	}
	if err := checkTTL(req.TTL); err != nil {
		return nil, fmt.Errorf("memcached: TTL %w", err)
	}
	n := namesOf(d.prefix, req.Key)
	secs := expirySeconds(req.TTL)

	g, err := d.grab(n, req.ID, secs)
	switch {
	case err != nil:
		if g.maybeHeld {
			d.giveBack(n, req.ID)
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, err
	case !g.held:
		return nil, &driver.LockedError{RetryAfter: g.retryAfter}
	}
	if err := ctx.Err(); err != nil {
		d.giveBack(n, req.ID)
		return nil, err
	}
	token, err := d.nextToken(n.fence)
	if ctxErr := ctx.Err(); ctxErr != nil {
		err = ctxErr
	}
	if err != nil {
		d.giveBack(n, req.ID)
		return nil, err
	}
	l := &lease{d: d, names: n, id: req.ID}
	l.Start(token, validityOf(secs))
	return l, nil
}

// grabbed is the outcome of grab.
type grabbed struct {
	held       bool          // the lock item is req.ID's
	retryAfter time.Duration // when not held: the holder's expected remaining time, or 0
	maybeHeld  bool          // when grab failed: the item may be req.ID's all the same
}

// grab adds the lock item for id, expiring in secs. When the item exists, it
// finds out how long its holder expects to keep it, from the hint cache or
// by reading the item; when the item vanished meanwhile, it adds once more.
func (d *Driver) grab(n names, id string, secs int32) (grabbed, error) {
	ttl := time.Duration(secs) * time.Second
	for try := 0; ; try++ {
		item := &gomemcache.Item{Key: n.lock, Value: encodeValue(id, time.Now().Add(ttl)), Expiration: secs}
		again, err := d.call(func() error { return d.mc.Add(item) })
		switch {
		case err == nil:
			d.hints.drop(n.lock)
			return grabbed{held: true}, nil
		case !errors.Is(err, gomemcache.ErrNotStored):
			return grabbed{maybeHeld: again || mayHaveApplied(err)}, err
		}
		if !again {
			if left, ok := d.hints.get(n.lock); ok {
				return grabbed{retryAfter: left}, nil
			}
		}
		var it *gomemcache.Item
		_, err = d.call(func() (err error) { it, err = d.mc.Get(n.lock); return err })
		switch {
		case errors.Is(err, gomemcache.ErrCacheMiss):
			if try == 0 {
				continue // released or expired since the add: try again at once
			}
			return grabbed{}, nil
		case err != nil:
			return grabbed{maybeHeld: again}, err
		}
		holder, expires, ok := parseValue(it.Value)
		if ok && holder == id {
			// An earlier attempt on a connection that broke had added it.
			d.hints.drop(n.lock)
			return grabbed{held: true}, nil
		}
		// The holder's clock wrote expires: the hint is as good as the
		// clocks agree, and only ever caps a waiter's sleep.
		if left := time.Until(expires); ok && left > 0 {
			d.hints.put(n.lock, left)
			return grabbed{retryAfter: left}, nil
		}
		return grabbed{}, nil
	}
}

// giveBack removes the lock item if it is still id's, for an Acquire that
// cannot return the grant. It is bounded by the client's Timeout per request;
// if the server cannot be reached, the item expires by its TTL.
func (d *Driver) giveBack(n names, id string) {
	_ = d.release(n, id)
}
