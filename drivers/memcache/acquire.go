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
// A refused attempt of a waiting Lock (req.Wait) takes the Driver a ticket in
// the lock's line of waiters (queue.go); the attempts made with it report a
// RetryAfter that paces the core's polling by the ticket's place in line, and
// those far back report the lock held without trying the add while the line
// moves (see "Waiting in line" in the package documentation). An attempt
// without req.Wait (a TryLock, a semaphore's permit) neither takes nor uses
// a ticket: it tries the add, as without a line.
//
// A request with a Value writes it into the lock item with the add, and
// once the token is drawn rewrites the item with the token beside it (gets
// and cas, owner-checked like Extend) before it returns: so the holder, its
// value and its token are in the item together as soon as the grant is
// settled, for Inspect to read in one request. That costs two more round
// trips (one when the server selector is known: see metacas.go); a lock
// without a value records its token at its first renewal instead, which
// rewrites the item anyway.
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

	// Only a waiting Lock waits in line (driver.Request.Wait).
	lined := req.Wait
	t := turn{tryAdd: true}
	if lined {
		t = d.checkIn(n)
	}
	if !t.tryAdd {
		// Tickets ahead are still being served: wait for them without
		// trying the add (see "Waiting in line").
		return nil, &driver.LockedError{RetryAfter: t.retryAfter()}
	}
	g, err := d.grab(ctx, n, holding{id: req.ID, value: req.Value}, secs)
	switch {
	case err != nil:
		if g.maybeHeld {
			d.giveBack(n, req.ID)
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, err
	case !g.held && t.ticket == 0:
		if lined {
			d.refused(n)
		}
		return nil, &driver.LockedError{RetryAfter: g.retryAfter}
	case !g.held:
		ra := t.retryAfter()
		if g.retryAfter > 0 {
			ra = min(ra, g.retryAfter)
		}
		return nil, &driver.LockedError{RetryAfter: ra}
	}
	d.admitted(n, t)
	if err := ctx.Err(); err != nil {
		d.giveBack(n, req.ID)
		return nil, err
	}
	token := g.token
	if token == 0 {
		token, err = d.drawToken(ctx, n.fence)
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		err = ctxErr
	}
	if err != nil {
		d.giveBack(n, req.ID)
		return nil, err
	}
	l := &lease{d: d, names: n, id: req.ID, value: req.Value, last: g.wrote}
	l.Start(token, validityOf(secs))
	if req.Value != "" {
		if err := d.settle(ctx, l, secs); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// errLostUnsettled is wrapped by the error of an Acquire whose lock item
// expired, was evicted or was taken over between its add and the rewrite
// that records its token: the grant never settled, so it is not returned.
var errLostUnsettled = errors.New("memcached: the lock item was lost before its fencing token was recorded")

// settle rewrites the lock item of the new lease l with its token and value,
// before Acquire returns it. When that fails the grant is given back.
func (d *Driver) settle(ctx context.Context, l *lease, secs int32) error {
	err := l.extend(secs)
	if ctxErr := ctx.Err(); ctxErr != nil {
		err = ctxErr
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, driver.ErrNotHeld):
		// Nothing of ours is left to give back; the lock is someone
		// else's now, or free: a waiter tries again.
		return fmt.Errorf("%w: %w", errLostUnsettled, driver.ErrLocked)
	}
	d.giveBack(l.names, l.id)
	return err
}

// grabbed is the outcome of grab.
type grabbed struct {
	held       bool          // the lock item is req.ID's
	retryAfter time.Duration // when not held: the holder's expected remaining time, or 0
	maybeHeld  bool          // when grab failed: the item may be req.ID's all the same
	wrote      written       // when held by a meta add: its connection and CAS unique (metacas.go)
	token      uint64        // when held: the token drawn with the add, or 0 if none was
}

// grab adds the lock item for h (its ID, and its value if any), expiring in
// secs. When the item exists, it finds out how long its holder expects to
// keep it, from the hint cache or by reading the item; when the item
// vanished meanwhile, it adds once more. With the server selector known,
// the add is a meta set in add mode, which also draws the fencing token in
// the same round trip unless a hint says the lock is held (see metacas.go).
func (d *Driver) grab(ctx context.Context, n names, h holding, secs int32) (grabbed, error) {
	id := h.id
	ttl := time.Duration(secs) * time.Second
	for try := 0; ; try++ {
		h.expires = time.Now().Add(ttl)
		var again bool
		var err error
		if d.meta != nil {
			_, hinted := d.hints.get(n.lock)
			var a metaAdded
			var maybeStored bool
			a, again, maybeStored, err = d.addMeta(ctx, n, encodeValue(h), secs, !hinted)
			switch {
			case err != nil:
				return grabbed{maybeHeld: maybeStored}, err
			case a.stored:
				d.hints.drop(n.lock)
				return grabbed{held: true, wrote: a.w, token: a.token}, nil
			}
		} else {
			item := &gomemcache.Item{Key: n.lock, Value: encodeValue(h), Expiration: secs}
			again, err = d.call(func() error { return d.mc.Add(item) })
			switch {
			case err == nil:
				d.hints.drop(n.lock)
				return grabbed{held: true}, nil
			case !errors.Is(err, gomemcache.ErrNotStored):
				return grabbed{maybeHeld: again || mayHaveApplied(err)}, err
			}
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
		holder, ok := parseValue(it.Value)
		expires := holder.expires
		if ok && holder.id == id {
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
