package dlock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// Direct handoff: when a lease is unlocked while another goroutine of the
// same Client waits for the key, a driver with driver.Transferer hands the
// lock straight to that waiter in one round trip (release and grant in one
// atomic step, with a new fencing token), instead of releasing it and
// letting the waiter acquire it in a second round trip. The waiter gets its
// lease without asking the backend at all.
//
// The head of a queue offers itself as a candidate when it is promoted
// behind a waiter that left with the lock, and again each time it goes back
// to sleep; it withdraws the offer before each attempt of its own, so that
// a transfer and its own acquisition cannot both succeed. An unlocking
// lease claims the candidate, transfers, and delivers the outcome. A
// candidate that gives up (its context ends, the Client closes) after being
// claimed leaves the outcome to the unlocking side, which gives back a
// grant nobody will use.
//
// When the driver reserves a block of fencing tokens with each grant
// (driver.Capabilities.TokenBlock), the handoff costs no round trip at all: the
// backend's hold stays as it is, and the waiter gets a lease of its own over
// it, with the next token of the block, the same deadline and the same
// renewal schedule. A block used up, a waiter asking for the lock otherwise
// than the holder has it (another TTL, renewal on or off), or a lease lost
// before its Unlock sends the handoff to the backend (Transfer) or back to
// a release.
//
// Fairness: after maxTransfers consecutive handoffs inside one Client, the
// next Unlock releases the lock without waking its own waiters first, so
// that waiters of other Clients get it (the next in the backend's queue of
// waiters, where it keeps one, or whoever its notification wakes first).

// maxTransfers bounds consecutive in-process handoffs of one queue.
const maxTransfers = 8

// candidate states, under Client.qmu.
const (
	offered   = iota // waiting in the queue's candidate slot
	claimed          // an Unlock is transferring to it
	delivered        // the outcome is in result
	abandoned        // gave up after being claimed: the Unlock cleans up
)

// candidate is a queue head offering to take the lock by transfer.
type candidate struct {
	req    driver.Request
	renew  bool // the waiter's Mutex renews its leases
	state  int
	result chan handoff // buffered: deliver never blocks
}

// handoff is the outcome of a transfer, as the candidate learns it.
type handoff struct {
	dl      driver.Lease // the lock, when transferred
	started time.Time    // when the transfer began: the grant's validity counts from it
	retryID string       // the outcome is unknown: try again with this request ID
	local   *inheritance // set when handed over without the backend
}

// inheritance is what a lease handed over without the backend takes from
// the lease it follows: the backend's hold is the same.
type inheritance struct {
	offset   uint32    // of the token in the grant's block
	deadline time.Time // the hold's
	renewAt  time.Time // when the hold is due for renewal
	loss     *lossRoute
}

// lossRoute sends a driver lease's loss report (driver.Lease.OnLoss, which
// is registered once per grant) to whichever lease of the Client holds it
// now: leases handed over without the backend share the driver lease. A
// report that arrives while the hold is between two leases is kept for the
// next one.
type lossRoute struct {
	mu     sync.Mutex
	l      *lease
	reason error // the report, once it came
}

// lost is the callback given to the driver lease. The driver may call it
// under its own locks, which its Lease methods take, and l.mu is held
// around some of those calls: losing the lease is left to a goroutine.
func (r *lossRoute) lost(reason error) {
	go func() {
		r.mu.Lock()
		r.reason = reason
		l := r.l
		r.mu.Unlock()
		l.lose(reason, "backend")
	}()
}

// to makes l the lease that loss reports go to, telling it at once of one
// that already came. Called from l.start, under l.mu.
func (r *lossRoute) to(l *lease) {
	r.mu.Lock()
	r.l = l
	reason := r.reason
	r.mu.Unlock()
	if reason != nil {
		go l.lose(reason, "backend")
	}
}

// transferable reports whether leases and waiters of m in mode may be
// handed over: exclusive, non-reentrant holds of a driver that can transfer
// or reserves blocks of tokens.
func (m *mutex) transferable(mode driver.Mode) bool {
	return (m.c.caps.Transferer != nil || m.c.caps.TokenBlock > 1) && mode == driver.Exclusive && m.cfg.owner == ""
}

// offerLocked makes a new offer for w, the head of q, when its lock can be
// handed over and it has none. Callers hold c.qmu.
func (c *Client) offerLocked(q *waitQueue, w *waiter) {
	if w.req == nil || w.cand != nil {
		return
	}
	id, err := newID()
	if err != nil {
		return // no offer: w acquires by itself
	}
	req := *w.req
	req.ID = id
	w.cand = &candidate{req: req, renew: w.renew, result: make(chan handoff, 1)}
	q.cand = w.cand
}

// offer makes sure w, the head of q, has an offer out, and returns it (nil
// when its lock cannot be handed over).
func (c *Client) offer(q *waitQueue, w *waiter) *candidate {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	c.offerLocked(q, w)
	return w.cand
}

// withdraw takes w's offer cand back. When an Unlock has already claimed
// it, withdraw waits for the outcome, or, when ctx ends first, abandons it
// to the Unlock and reports false. The outcome is zero when cand was not
// claimed.
func (c *Client) withdraw(ctx context.Context, q *waitQueue, w *waiter, cand *candidate) (handoff, bool) {
	c.qmu.Lock()
	if cand.state == offered {
		c.retract(q, w)
		c.qmu.Unlock()
		return handoff{}, true
	}
	c.qmu.Unlock()
	select {
	case h := <-cand.result:
		c.received(w)
		return h, true
	case <-ctx.Done():
	}
	c.qmu.Lock()
	orphan := c.retract(q, w)
	c.qmu.Unlock()
	if orphan != nil {
		c.giveBack(ctx, orphan.req, <-orphan.result)
	}
	return handoff{}, false
}

// received forgets w's offer, whose outcome w has read.
func (c *Client) received(w *waiter) {
	c.qmu.Lock()
	w.cand = nil
	c.qmu.Unlock()
}

// retract takes w's offer out of q: an offer still out is withdrawn, a
// claimed one abandoned to its Unlock, and a delivered one returned, for the
// caller to give back outside c.qmu. Callers hold c.qmu.
func (c *Client) retract(q *waitQueue, w *waiter) (orphan *candidate) {
	cand := w.cand
	if cand == nil {
		return nil
	}
	w.cand = nil
	switch cand.state {
	case offered:
		if q.cand == cand {
			q.cand = nil
		}
	case claimed:
		cand.state = abandoned
	case delivered:
		return cand
	}
	return nil
}

// claim takes the candidate waiting for key, when there is one and the
// queue has not had its share of consecutive handoffs. yield reports that
// it has: the caller then releases without waking this Client's waiters.
func (c *Client) claim(key string) (cand *candidate, yield bool) {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	for _, q := range c.queues[key] {
		if q.mode != driver.Exclusive || q.owner != "" || q.cand == nil {
			continue
		}
		if q.transfers >= maxTransfers {
			q.transfers = 0
			return nil, c.caps.Notifier != nil // without notifications, yielding would stall the head
		}
		q.transfers++
		cand, q.cand = q.cand, nil
		cand.state = claimed
		return cand, false
	}
	return nil, false
}

// deliver hands a transfer's outcome to cand, or, when cand gave up, gives
// the lock back.
func (c *Client) deliver(ctx context.Context, cand *candidate, h handoff) {
	c.qmu.Lock()
	if cand.state == abandoned {
		c.qmu.Unlock()
		c.giveBack(ctx, cand.req, h)
		return
	}
	cand.state = delivered
	cand.result <- h
	c.qmu.Unlock()
}

// giveBack releases a transferred lock that nobody will use: the grant, or,
// when the transfer's outcome is unknown, whatever Acquire with the same
// request recovers (driver.Transferer asks it to be idempotent by ID). Then it wakes the Client's other waiters.
func (c *Client) giveBack(ctx context.Context, req driver.Request, h handoff) {
	cleanup, cancel := cleanupContext(ctx, req.TTL)
	defer cancel()
	dl := h.dl
	if dl == nil && h.retryID != "" {
		dl, _ = c.drv.Acquire(cleanup, req)
	}
	if dl != nil {
		_ = dl.Release(cleanup)
		c.kick(req.Key)
	}
}

// transfer hands l's lock to a waiting candidate of the same Client, when
// the driver can. It reports whether it dealt with the lock (transferred
// it, found it lost, or released it after a transfer whose outcome is
// unknown: err says which), and whether a plain release should skip waking
// this Client's waiters.
//
// held tells whether l was still held when Unlock ended it: a lease lost
// before may have lost the backend's hold too, so it is never handed over
// without the backend, which alone can tell.
func (l *lease) transfer(ctx context.Context, held bool) (done bool, yield bool, err error) {
	c := l.m.c
	if ctx.Err() != nil || !l.m.transferable(l.mode) {
		return false, false, nil
	}
	cand, yield := c.claim(l.m.key)
	if cand == nil {
		return false, yield, nil
	}
	if held {
		if h, ok := l.handOver(cand); ok {
			c.deliver(ctx, cand, h)
			return true, false, nil
		}
	}
	if c.caps.Transferer == nil {
		// The backend cannot transfer: the caller releases, and its
		// release wakes the candidate, which acquires by itself.
		c.deliver(ctx, cand, handoff{})
		return false, false, nil
	}
	started := time.Now()
	dl, err := c.caps.Transferer.Transfer(ctx, l.d, cand.req)
	switch {
	case err == nil:
		c.deliver(ctx, cand, handoff{dl: dl, started: started})
		return true, false, nil
	case errors.Is(err, ErrLocked):
		// Not transferable as a whole: the caller releases, and its
		// release wakes the candidate, which tries again.
		c.deliver(ctx, cand, handoff{})
		return false, false, nil
	case errors.Is(err, ErrNotHeld):
		c.deliver(ctx, cand, handoff{})
		return true, false, err
	default:
		// The outcome is unknown: the transfer may have happened, or
		// not, or may yet happen. Release l's hold: Release is
		// owner-checked, so it frees the lock only where the transfer
		// did not happen, and a transfer that arrives later finds l no
		// longer holding and changes nothing. The candidate then tries
		// with the transfer's request ID, which recovers the grant if
		// the transfer happened (driver.Transferer) and takes the freed
		// lock otherwise; had it been left with the old hold in place,
		// the lock would stay held until its TTL.
		rerr := l.release(ctx)
		c.deliver(ctx, cand, handoff{retryID: cand.req.ID})
		switch {
		case rerr == nil:
			c.kick(l.m.key) // the lock is free: wake readers too
			return true, false, nil
		case errors.Is(rerr, ErrNotHeld):
			return true, false, nil // transferred (or lost: held says which)
		}
		return true, false, err
	}
}

// handOver hands l's hold to cand without the backend, when l's grant
// reserved tokens left for it and cand asks for the lock as l holds it.
// l has finished (Unlock), so its deadline and renewal are no longer
// changed by anyone.
func (l *lease) handOver(cand *candidate) (handoff, bool) {
	if uint64(l.offset)+1 >= l.m.c.caps.TokenBlock || cand.req.TTL != l.m.cfg.ttl || cand.renew != l.m.cfg.renew {
		return handoff{}, false
	}
	l.mu.Lock()
	in := &inheritance{offset: l.offset + 1, deadline: l.deadline, renewAt: l.renewAt, loss: l.loss}
	l.mu.Unlock()
	return handoff{dl: l.d, started: time.Now(), local: in}, true
}
