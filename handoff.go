package dlock

import (
	"context"
	"errors"
	"strconv"
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
//
// # The state machine
//
// A handoff is one candidate: the offer of the head of a wait queue to take
// the lock by transfer. Two goroutines move it, the waiter (W) and an
// Unlock (U), and only through handoffTable below, under Client.qmu:
//
//	from       event    to         by  effect
//	unoffered  offer    offered    W   the candidate goes into its queue's slot
//	offered    claim    claimed    U   out of the slot; U transfers to it
//	offered    leave    withdrawn  W   out of the slot; W acts on its own
//	claimed    deliver  delivered  U   the outcome goes into result; W owns it
//	claimed    leave    abandoned  W   W is gone; U will own the outcome
//	delivered  receive  received   W   W uses the outcome (see below)
//	delivered  leave    givenBack  W   W gives the outcome back (giveBack)
//	abandoned  deliver  givenBack  U   U gives the outcome back (giveBack)
//
// withdrawn, received and givenBack are final. A received outcome is a lease
// (a transfer's grant, or the hold itself with the next token of its block),
// nothing (the Unlock released instead: W tries by itself), or unknown (W
// tries again with the transfer's request ID, which recovers the grant if
// there was one, or gives it back that way when its context has ended:
// mutex.sleep). The head offers itself when it is promoted behind a waiter
// that left with the lock, and again each time it goes back to sleep (a new
// candidate each time); it leaves before each attempt of its own (withdraw),
// so that a transfer and its own acquisition cannot both succeed: an offer
// already claimed is waited for instead. While a lease of its own Client
// holds the lock, it makes no attempt (none could succeed): it waits for
// that lease's Unlock, loss or expiry (awaitHolder, waitqueue.go), so that
// the Unlock finds it offered. An event the table does not allow
// is a bug of the core: step reports it through invariantBroken, changes
// nothing, and each caller then takes the way that cannot grant twice (see
// claim, deliver, leave).
//
// # Safety
//
// A handoff never grants twice: the lock passes to one lease at most, and is
// held by one lease of the Client at a time. The releasing lease has ended
// (Err set, renewal and expiry stopped, untracked) before an Unlock claims a
// candidate, so a lease handed over is never also held by its releaser; in a
// handoff without the backend, the new lease alone renews and watches the
// shared driver lease. Every transfer's outcome has exactly one owner,
// decided by the candidate's state under Client.qmu: the waiter when the
// outcome was delivered before it left (it makes a lease of it, or gives it
// back), the Unlock otherwise (it gives it back). So a waiter that gives up
// (its context ends, the Client closes) never leaves a lock behind that
// nobody will release, whether it leaves before the claim, during the
// transfer or after the delivery. An Unlock returns only once its outcome is
// delivered or given back, and Close waits for it (it is an operation); a
// grant that reaches a waiter after Close is given back by acquireTraced. A
// transfer whose outcome is unknown is recovered by the waiter with the
// transfer's request ID, or given back with it. A lease lost before its
// Unlock is never handed over without the backend, which alone can tell
// whether anything is still held; a loss report that arrives while a hold
// passes between two leases is kept by the shared lossRoute for the next
// one.
//
// # Locks
//
// The core's mutexes, what each guards, and what may be taken under it.
// Nothing else is taken under any of them; in particular Client.qmu and
// lease.mu are never held together, and none is held across a round trip
// to the backend (giveBack, Transfer, Release run with none held).
//
//   - Client.qmu: the wait queues (Client.queues, Client.idle, the
//     semaphores' Client.watchers, every
//     waitQueue's fields, waiter.cand) and every candidate's state. A leaf:
//     under it only non-blocking channel operations (result is buffered,
//     kick is sent without waiting, turn is closed), newID, and the tests'
//     hooks (observeHandoff, invariantBroken).
//   - Client.mu: closed, the tracked leases, and the registration of
//     operations (ops) against Close. A leaf.
//   - lease.mu: the lease's own state (deadline, err, lastErr, unlocked,
//     started, done, expiry, loss). Under it: renewer.mu, the expiry
//     queue's lock (internal/deadline), Client.mu (untrack), lossRoute.mu
//     (start), telemetry, and the driver lease's OnLoss and Validity. So a
//     driver's loss callback must not take lease.mu itself: it is handed
//     to a goroutine.
//   - renewer.mu: the renewal heap and timer, and each lease's renewAt and
//     heapIndex. Under it: the driver lease's Validity (renewInterval),
//     nothing of the core's: it reads whether a lease has ended from
//     lease.ended, an atomic, rather than under lease.mu.
//   - lossRoute.mu: a shared driver lease's current lease and the loss
//     report it keeps. A leaf: the report is delivered (lease.lose, which
//     takes lease.mu) after it is released.
//   - the expiry queue's lock (internal/deadline): its entries. A leaf: it
//     calls lease.expire after releasing it.
//
// The order is therefore lease.mu before renewer.mu, the expiry queue's
// lock, Client.mu and lossRoute.mu; every other pair is never nested.

// maxTransfers bounds consecutive in-process handoffs of one queue.
const maxTransfers = 8

// handoffState is where a candidate is in its handoff (see the table in
// this file's doc). It changes only through step, under Client.qmu.
type handoffState uint8

const (
	unoffered handoffState = iota // made, not yet in its queue's slot
	offered                       // in the slot: an Unlock may claim it
	claimed                       // an Unlock is transferring to it
	delivered                     // the outcome is in result; the waiter owns it
	abandoned                     // the waiter left after the claim; the Unlock owns the outcome
	withdrawn                     // final: taken back before any claim
	received                      // final: the waiter has the outcome
	givenBack                     // final: the outcome was given back
	numHandoffStates
)

var handoffStateNames = [numHandoffStates]string{"unoffered", "offered", "claimed", "delivered", "abandoned", "withdrawn", "received", "givenBack"}

func (s handoffState) String() string {
	if s < numHandoffStates {
		return handoffStateNames[s]
	}
	return "handoffState(" + strconv.Itoa(int(s)) + ")"
}

// handoffEvent is what moves a candidate from one state to the next.
type handoffEvent uint8

const (
	evOffer   handoffEvent = iota // waiter: put the candidate in its queue's slot
	evClaim                       // Unlock: take it out, to transfer to it
	evDeliver                     // Unlock: the transfer's outcome is known
	evReceive                     // waiter: it has read the outcome
	evLeave                       // waiter: it stops waiting for a handoff
	numHandoffEvents
)

var handoffEventNames = [numHandoffEvents]string{"offer", "claim", "deliver", "receive", "leave"}

func (e handoffEvent) String() string {
	if e < numHandoffEvents {
		return handoffEventNames[e]
	}
	return "handoffEvent(" + strconv.Itoa(int(e)) + ")"
}

// handoffTable holds every transition: the state an event leads to from
// each state, unoffered (which nothing leads back to) where it is not
// allowed.
var handoffTable = [numHandoffStates][numHandoffEvents]handoffState{
	unoffered: {evOffer: offered},
	offered:   {evClaim: claimed, evLeave: withdrawn},
	claimed:   {evDeliver: delivered, evLeave: abandoned},
	delivered: {evReceive: received, evLeave: givenBack},
	abandoned: {evDeliver: givenBack},
}

// transition is the state ev leads to from from, and whether the table
// allows ev there.
func transition(from handoffState, ev handoffEvent) (handoffState, bool) {
	if from >= numHandoffStates || ev >= numHandoffEvents {
		return from, false
	}
	to := handoffTable[from][ev]
	return to, to != unoffered
}

// invariantBroken is told of a bug of the core: an event the state machine
// does not allow. It does nothing in production, where the caller goes on
// the safe way; tests make it fail the run (export_test.go).
var invariantBroken = func(string) {}

// candidate is a queue head offering to take the lock by transfer.
type candidate struct {
	req    driver.Request
	renew  bool         // the waiter's Mutex renews its leases
	state  handoffState // under Client.qmu
	result chan handoff // buffered: deliver never blocks
	// observe, when set (tests only), sees every transition.
	observe func(from handoffState, ev handoffEvent, to handoffState)
}

// step moves cand by ev, and reports whether the table allowed it. Callers
// hold Client.qmu.
func (cand *candidate) step(ev handoffEvent) bool {
	from := cand.state
	to, ok := transition(from, ev)
	if !ok {
		invariantBroken("dlock: handoff event " + ev.String() + " in state " + from.String())
		return false
	}
	cand.state = to
	if cand.observe != nil {
		cand.observe(from, ev, to)
	}
	return true
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

// transferable reports whether leases and waiters of m in mode may be
// handed over: exclusive, non-reentrant holds of a driver that can transfer
// or reserves blocks of tokens, and not an election's leadership, whose
// hold on the backend must carry its own leader's value and term.
func (m *mutex) transferable(mode driver.Mode) bool {
	return (m.c.caps.Transferer != nil || m.c.caps.TokenBlock > 1) && mode == driver.Exclusive && m.cfg.owner == "" && m.cfg.value == ""
}

// The waiter's side: offer, withdraw (leave or wait for the claimed
// outcome), receive, leave.

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
	cand := &candidate{req: req, renew: w.renew, result: make(chan handoff, 1), observe: c.observeHandoff}
	if !cand.step(evOffer) {
		return
	}
	w.cand, q.cand = cand, cand
}

// offer makes sure w, the head of q, has an offer out, and returns it (nil
// when its lock cannot be handed over).
func (c *Client) offer(q *waitQueue, w *waiter) *candidate {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	c.offerLocked(q, w)
	return w.cand
}

// withdraw takes w's offer cand back before w acts on its own. When an
// Unlock has already claimed it, withdraw waits for the outcome, or, when
// ctx ends first, leaves it to the Unlock (or gives back one delivered
// meanwhile) and reports false. The outcome is zero when cand was not
// claimed.
func (c *Client) withdraw(ctx context.Context, q *waitQueue, w *waiter, cand *candidate) (handoff, bool) {
	c.qmu.Lock()
	if cand.state == offered {
		c.leave(q, w)
		c.qmu.Unlock()
		return handoff{}, true
	}
	c.qmu.Unlock()
	select {
	case h := <-cand.result:
		c.receive(w, cand)
		return h, true
	case <-ctx.Done():
	}
	c.qmu.Lock()
	orphan := c.leave(q, w)
	c.qmu.Unlock()
	if orphan != nil {
		c.giveBack(ctx, orphan.req, <-orphan.result)
	}
	return handoff{}, false
}

// receive records that w has read the outcome of its offer cand.
func (c *Client) receive(w *waiter, cand *candidate) {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if w.cand == cand {
		w.cand = nil
	}
	cand.step(evReceive) // a bug otherwise: w has the outcome either way
}

// leave takes w's offer, if any, out of q: one still offered is withdrawn,
// a claimed one abandoned to its Unlock, and a delivered one returned, for
// the caller to give back outside c.qmu. Callers hold c.qmu.
func (c *Client) leave(q *waitQueue, w *waiter) (orphan *candidate) {
	cand := w.cand
	if cand == nil {
		return nil
	}
	w.cand = nil
	if q.cand == cand {
		q.cand = nil // no Unlock may claim it from now on, whatever its state
	}
	if cand.step(evLeave) && cand.state == givenBack {
		return cand
	}
	return nil
}

// The Unlock's side: claim, deliver, and giving back what nobody will use.

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
		cand, q.cand = q.cand, nil
		if !cand.step(evClaim) {
			return nil, false // a bug: release as if nobody waited
		}
		q.transfers++
		return cand, false
	}
	return nil, false
}

// deliver hands a transfer's outcome to cand, or, when cand has left, gives
// the lock back.
func (c *Client) deliver(ctx context.Context, cand *candidate, h handoff) {
	c.qmu.Lock()
	if cand.step(evDeliver) && cand.state == delivered {
		cand.result <- h
		c.qmu.Unlock()
		return
	}
	c.qmu.Unlock()
	// givenBack, or a bug: either way nobody will read h.
	c.giveBack(ctx, cand.req, h)
}

// giveBack releases a transferred lock that nobody will use: the grant, or,
// when the transfer's outcome is unknown, whatever Acquire with the same
// request recovers (driver.Transferer asks it to be idempotent by ID). Then
// it wakes the Client's other waiters.
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

// lossRoute sends a driver lease's loss report (driver.Lease.OnLoss, which
// is registered once per grant) to whichever lease of the Client holds it
// now: leases handed over without the backend share the driver lease. A
// report that arrives while the hold is between two leases is kept for the
// next one.
type lossRoute struct {
	mu     sync.Mutex // a leaf (the lock order: in this file's doc)
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
