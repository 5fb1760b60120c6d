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
			c.offerLocked(q, next)
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

// dropIdle closes the subscription the queue of l's lock left behind when l
// took the lock, unless a new queue has adopted it: called when l ends.
func (c *Client) dropIdle(l *lease) {
	id := queueID{l.m.key, l.mode, l.m.cfg.owner}
	c.qmu.Lock()
	idle, ok := c.idle[id]
	if ok && idle.l == l {
		delete(c.idle, id)
	}
	c.qmu.Unlock()
	if ok && idle.l == l && idle.sub != nil {
		_ = idle.sub.Close()
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
