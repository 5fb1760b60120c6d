package dlock

import (
	"context"
	"slices"

	"github.com/dlock-go/dlock/driver"
)

// Waiter coalescing: the goroutines of one Client waiting for the same lock
// form a FIFO queue, and only its head waits on the backend (one subscription,
// one poller, one server-side wait), so the backend's work per handoff does
// not grow with the number of waiters in a process. When the head gets the
// lock, the next in line becomes head.
//
// Waiters queue separately by mode and by reentrant owner: readers must not
// wait behind writers of their own process that the backend would not make
// them wait for, and a reentrant owner must never queue behind others, or its
// nested Lock would wait for itself.

// waitQueue is the line of one Client's waiters for one key, mode and owner.
type waitQueue struct {
	key     string
	mode    driver.Mode
	owner   string
	waiters []*waiter // FIFO; waiters[0] is the head

	// kick wakes the head: a lease of this Client on the key was released.
	kick chan struct{}
	// sub is the backend subscription successive heads share, so that a
	// handoff inside the process costs no SUBSCRIBE and UNSUBSCRIBE.
	sub driver.Subscription
	// held: the previous head left with the lock, or, for a new queue, a
	// lease of this Client holds it (enqueue), so the new head need not
	// try before the next wake-up.
	held bool
	// holder is that lease, until its Unlock is done with the lock
	// (unlocked: holderGone is then closed) or the head finds it lost
	// (forgetHolder); nil otherwise. While it holds, the head waits for
	// its end only (awaitHolder).
	holder     *lease
	holderGone chan struct{}
	// cand is the head's offer to take the lock by transfer while it is
	// offered (nil once claimed or withdrawn), and transfers counts
	// consecutive transfers to this queue (handoff.go).
	cand      *candidate
	transfers int
}

// waiter is one goroutine in a waitQueue.
type waiter struct {
	turn chan struct{} // closed when the waiter becomes the head
	// req is the waiter's request, when its lock can be handed over to it
	// (handoff.go), and cand its current offer, under Client.qmu.
	req   *driver.Request
	cand  *candidate
	renew bool // the waiter's Mutex renews its leases
}

// queueID names a waitQueue, and the subscription it leaves behind.
type queueID struct {
	key   string
	mode  driver.Mode
	owner string
}

// enqueue puts a waiter at the end of its queue; it is the head at once when
// the queue was empty. req is set when the lock can be handed over to it. A
// new queue adopts the subscription the previous one left behind, and
// learns from it whether a lease of this Client holds the lock.
func (c *Client) enqueue(key string, mode driver.Mode, owner string, req *driver.Request, renew bool) (*waitQueue, *waiter) {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	i := slices.IndexFunc(c.queues[key], func(q *waitQueue) bool { return q.mode == mode && q.owner == owner })
	var q *waitQueue
	if i >= 0 {
		q = c.queues[key][i]
	} else {
		id := queueID{key, mode, owner}
		idle := c.idle[id]
		q = &waitQueue{key: key, mode: mode, owner: owner, kick: make(chan struct{}, 1), sub: idle.sub}
		// A lease of this Client holds the lock (the last waiter of the
		// previous queue left with it, and it has not ended): the head
		// waits for its Unlock, which hands the lock to the head's offer
		// or kicks the queue (both under c.qmu, after this), instead of
		// first asking the backend for a lock known to be held. Asking
		// would cost two round trips, during which an Unlock finds no
		// offer and sends the handoff through the backend.
		q.held = req != nil && idle.l != nil && !idle.l.ended.Load()
		if q.held {
			q.setHolder(idle.l)
			// The handoffs go on from the previous queue's: they
			// count towards yielding to other Clients (handoff.go),
			// or two goroutines passing the lock back and forth,
			// each alone in its queue, would never yield it.
			q.transfers = idle.transfers
		}
		delete(c.idle, id)
		c.queues[key] = append(c.queues[key], q)
	}
	w := &waiter{turn: make(chan struct{}), req: req, renew: renew}
	q.waiters = append(q.waiters, w)
	if len(q.waiters) == 1 {
		close(w.turn)
	}
	return q, w
}

// dequeue takes w out of its queue, withdrawing its offer. When w was the
// head, the next waiter becomes head; when w leaves with the lock, the new
// head offers itself at once, as it will wait for w's Unlock anyway. When
// the queue is empty, it goes; its subscription stays while w holds the
// lock (the queue it would need next adopts it) and closes otherwise.
func (c *Client) dequeue(q *waitQueue, w *waiter, l *lease) {
	acquired := l != nil
	c.qmu.Lock()
	orphan := c.leave(q, w)
	i := slices.Index(q.waiters, w)
	q.waiters = slices.Delete(q.waiters, i, i+1)
	var sub driver.Subscription
	switch {
	case len(q.waiters) == 0:
		sub, q.sub = q.sub, nil
		c.queues[q.key] = slices.DeleteFunc(c.queues[q.key], func(o *waitQueue) bool { return o == q })
		if len(c.queues[q.key]) == 0 {
			delete(c.queues, q.key)
		}
		if acquired && (sub != nil || l.m.transferable(l.mode)) {
			// Kept without a subscription too when l's lock can be
			// handed over: the next queue's head then knows that l
			// holds it (enqueue).
			c.idle[queueID{q.key, q.mode, q.owner}], sub = idleSub{sub, l, q.transfers}, nil
		}
	case i == 0:
		q.held = acquired
		next := q.waiters[0]
		if acquired {
			q.setHolder(l)
			c.offerLocked(q, next)
		} else {
			q.setHolder(nil) // the new head tries first, as a new queue's does
		}
		close(next.turn)
	}
	c.qmu.Unlock()
	if sub != nil {
		_ = sub.Close()
	}
	if orphan != nil {
		c.giveBack(context.Background(), orphan.req, <-orphan.result)
	}
}

// idleSub is what a queue whose last waiter, l, left with the lock leaves
// behind: its subscription (nil when it had none), l, and its count of
// consecutive handoffs.
type idleSub struct {
	sub       driver.Subscription
	l         *lease
	transfers int
}

// unlocked is told by l's Unlock that it is done with the lock: it has
// handed it over or released it (or failed to). The queue whose head waits
// for l's end (awaitHolder) goes back to waiting as usual, and the
// subscription the queue of l's lock left behind when l took the lock is
// closed, unless a new queue has adopted it.
func (c *Client) unlocked(l *lease) {
	id := queueID{l.m.key, l.mode, l.m.cfg.owner}
	c.qmu.Lock()
	for _, q := range c.queues[l.m.key] {
		if q.holder == l {
			q.setHolder(nil)
		}
	}
	idle, ok := c.idle[id]
	if ok && idle.l == l {
		delete(c.idle, id)
	}
	c.qmu.Unlock()
	if ok && idle.l == l && idle.sub != nil {
		_ = idle.sub.Close()
	}
}

// setHolder makes l (nil: none) the lease of this Client that q's head
// knows to hold the lock, waking a head that waited for the previous one's
// end. Callers hold Client.qmu.
func (q *waitQueue) setHolder(l *lease) {
	if q.holderGone != nil {
		close(q.holderGone)
	}
	q.holder, q.holderGone = l, nil
	if l != nil {
		q.holderGone = make(chan struct{})
	}
}

// holdEnd is how awaitHolder's wait ended.
type holdEnd uint8

const (
	holdGone   holdEnd = iota // no lease of this Client is known to hold the lock: wait as usual
	holdHanded                // the lock was handed over
	holdWake                  // try now: the lock was released or lost, or ctx ended
)

// awaitHolder is the wait of q's head, offered for a handoff (handed),
// while a lease of this Client holds the lock (q.holder): it waits for that
// lease's end alone. Its Unlock hands the lock over (handed), or releases
// it and kicks the queue, or, when it yields to other Clients (or its
// release failed), only says it is done, and the head waits as usual; its
// loss or expiry ends the wait too, so that a lease lost silently holds the
// head up no longer than until the Client learns of it (at its deadline at
// the latest).
//
// Nothing else can free the lock meanwhile. The head's offer is for an
// exclusive, non-reentrant lock (transferable), and so is the holder's, of
// the same queue: a try on the backend would be refused, and a notification
// can only be one of an earlier release arriving late (a RedLock's masters
// each send one). Waking for them would withdraw the offer for a round
// trip, and an Unlock meanwhile would find none and release through the
// backend, whose notifications wake the head again: the lone waiter of a
// RedLock then went through the masters at almost every handoff.
func (c *Client) awaitHolder(ctx context.Context, q *waitQueue, handed <-chan handoff) (handoff, holdEnd) {
	var (
		cur  *lease
		done <-chan struct{} // cur's Done, nil once its Unlock is known to be under way
	)
	for {
		c.qmu.Lock()
		l, gone := q.holder, q.holderGone
		c.qmu.Unlock()
		if l == nil {
			return handoff{}, holdGone
		}
		if l != cur {
			cur, done = l, l.Done()
		}
		select {
		case <-ctx.Done():
			return handoff{}, holdWake
		case h := <-handed:
			return h, holdHanded
		case <-q.kick:
			return handoff{}, holdWake
		case <-gone: // look again: another holder, or none
		case <-done:
			if !l.unlockCalled() {
				// Lost or expired before any Unlock: the backend alone
				// can tell whether the lock is free.
				c.forgetHolder(q, l)
				return handoff{}, holdWake
			}
			// Ended by its Unlock, which claims the offer or releases,
			// and then closes gone (unlocked).
			done = nil
		}
	}
}

// unlockCalled reports whether Unlock has been called on l: a lease that
// ended otherwise was lost, expired, or ended by Close.
func (l *lease) unlockCalled() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.unlocked
}

// forgetHolder stops q's head from waiting for l, found lost.
func (c *Client) forgetHolder(q *waitQueue, l *lease) {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if q.holder == l {
		q.setHolder(nil)
	}
}

// subscription returns the queue's backend subscription, subscribing on first
// use. Only the head calls it. Without a Notifier, or when subscribing fails,
// it returns nil and the head polls.
func (c *Client) subscription(ctx context.Context, q *waitQueue) (<-chan struct{}, error) {
	if c.caps.Notifier == nil {
		return nil, nil
	}
	c.qmu.Lock()
	sub := q.sub
	c.qmu.Unlock()
	if sub == nil {
		var err error
		if sub, err = c.caps.Notifier.Subscribe(ctx, q.key); err != nil {
			return nil, err
		}
		c.qmu.Lock()
		q.sub = sub
		c.qmu.Unlock()
	}
	return sub.C(), nil
}

// kick wakes the heads waiting for key in this Client, and the semaphores'
// gate holders waiting for it (watchReleases), after one of its leases on
// key was released: a local handoff need not wait for the backend's
// notification or the next poll.
func (c *Client) kick(key string) {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	for _, q := range c.queues[key] {
		select {
		case q.kick <- struct{}{}:
		default:
		}
	}
	for _, w := range c.watchers[key] {
		notify(w)
	}
}

// Waiters returns how many goroutines of this Client are waiting in Lock or
// RLock for key. Other processes' waiters are not counted.
func (c *Client) Waiters(key string) int {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	n := 0
	for _, q := range c.queues[key] {
		n += len(q.waiters)
	}
	return n
}
