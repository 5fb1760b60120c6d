package dlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// mutex implements Mutex and RWMutex over the Client's driver.
type mutex struct {
	c   *Client
	key string
	cfg config
}

var _ RWMutex = (*mutex)(nil)

func (m *mutex) Key() string { return m.key }

func (m *mutex) Lock(ctx context.Context) (Lease, error) {
	return m.acquire(ctx, driver.Exclusive, true)
}

func (m *mutex) TryLock(ctx context.Context) (Lease, error) {
	return m.acquire(ctx, driver.Exclusive, false)
}

func (m *mutex) RLock(ctx context.Context) (Lease, error) {
	return m.acquire(ctx, driver.Shared, true)
}

func (m *mutex) TryRLock(ctx context.Context) (Lease, error) {
	return m.acquire(ctx, driver.Shared, false)
}

// acquire takes the lock in mode, waiting for it when wait is set. It returns
// exactly ctx.Err() when ctx ends first, and ErrClosed when the Client closes.
func (m *mutex) acquire(ctx context.Context, mode driver.Mode, wait bool) (Lease, error) {
	return m.c.acquire(ctx, opNames[mode][wait], m.key, mode, func(ctx context.Context) (*lease, error) {
		return m.attempts(ctx, mode, wait)
	})
}

// acquire is the frame of every acquisition: it counts the operation for
// Close, traces it, bounds attempt's backend calls by ctx and by Close,
// wraps its error with op and key, and starts the lease it returns (or gives
// it back when Close ran meanwhile). It returns exactly ctx.Err() when ctx
// ends first, and ErrClosed when the Client closes.
func (c *Client) acquire(ctx context.Context, op, key string, mode driver.Mode, attempt func(context.Context) (*lease, error)) (Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !c.beginOp() {
		return nil, ErrClosed
	}
	defer c.ops.Done()

	ctx, rec := c.tel.startAcquire(ctx, op, key, mode)
	l, err := c.acquireTraced(ctx, op, key, attempt)
	c.tel.endAcquire(ctx, rec, key, mode, l, err)
	if err != nil {
		return nil, err // not a nil *lease in a non-nil Lease
	}
	return l, nil
}

func (c *Client) acquireTraced(ctx context.Context, op, key string, attempt func(context.Context) (*lease, error)) (*lease, error) {
	// Every backend call is bounded by the caller's ctx and by Close.
	opCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer c.unwatch(&c.acquiring, c.watch(&c.acquiring, cancel))

	l, err := attempt(opCtx)
	if err != nil {
		if errors.Is(context.Cause(opCtx), ErrClosed) && ctx.Err() == nil {
			return nil, ErrClosed
		}
		return nil, wrapErr(ctx, op, key, err)
	}
	if !c.track(l) {
		// Close ran while the grant was on its way: give it back.
		_ = l.end(context.WithoutCancel(ctx), ErrClosed)
		return nil, ErrClosed
	}
	l.start()
	return l, nil
}

// attempts runs acquisition attempts until one succeeds, one fails for a
// reason other than the lock being held, or (when wait is false) the first
// attempt finds the lock held.
func (m *mutex) attempts(ctx context.Context, mode driver.Mode, wait bool) (*lease, error) {
	if !wait {
		return m.attempt(ctx, mode, m.c.drv.Acquire)
	}
	var req *driver.Request
	if m.transferable(mode) {
		r := m.request(mode, "") // each offer gets its own ID
		req = &r
	}
	q, w := m.c.enqueue(m.key, mode, m.cfg.owner, req, m.cfg.renew)
	counted := m.c.tel.waiting(ctx, mode)
	var l *lease
	defer func() {
		m.c.dequeue(q, w, l)
		m.c.tel.waited(ctx, mode, counted)
	}()
	select {
	case <-w.turn:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	var err error
	l, err = m.waitAsHead(ctx, q, w, mode)
	return l, err
}

// waitAsHead acquires for the head of a wait queue: through the backend's
// own queue when it has one, otherwise by trying again at every wake-up (a
// notification from the backend, a release in this Client) and at jittered,
// growing intervals regardless. It rides out transient errors (transient.go)
// unless the Mutex fails fast.
func (m *mutex) waitAsHead(ctx context.Context, q *waitQueue, w *waiter, mode driver.Mode) (*lease, error) {
	backoff := newBackoff(m.cfg.pollMin, m.cfg.pollMax)
	failures := 0 // failed attempts in a row
	rideOut := func(err error) bool {
		if m.cfg.failFast || !transient(ctx, err) {
			return false
		}
		failures++
		m.c.tel.waitedThrough(ctx, m.key, mode, failures, err)
		return true
	}
	// giveUp is the error of a failed attempt not ridden out: exactly
	// ctx.Err() once ctx has ended, whatever the attempt said.
	giveUp := func(err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	if m.c.caps.Blocking {
		for {
			l, err := m.attempt(ctx, mode, m.block)
			switch {
			case err == nil:
				return l, nil
			case errors.Is(err, errExpiredOnArrival):
			case rideOut(err):
				if err := pause(ctx, backoff.next(0)); err != nil {
					return nil, err
				}
			default:
				return nil, giveUp(err)
			}
		}
	}
	// When the previous head left with the lock, or a lease of this Client
	// holds it (enqueue), it is held: wait first, offered for a handoff.
	// Otherwise try once before subscribing: the lock is usually free, and
	// an uncontended Lock then costs no subscription (nor the notification
	// of its own release). With a Notifier this try does not queue
	// (driver.Request.Wait): a driver that keeps a queue of waiters learns
	// that a waiter gave up from its subscription closing, so it must not
	// queue one before it subscribes. A head whose key's latest Lock in
	// this Client had to wait expects to wait again: it subscribes first
	// instead, so that its first try may queue (contention.go). Without a
	// Notifier every try of a waiting Lock may queue, this one too (what it
	// queues lapses by itself), and costs nothing more when the lock is
	// free.
	contended := m.c.contended.slot(m.key)
	eager := !q.held && m.c.caps.Notifier != nil && contended.Load()
	refused := false // an attempt of this Lock was refused
	tried := false
	if !q.held && !eager {
		l, err := m.attempt(ctx, mode, m.firstTry())
		switch {
		case err == nil:
			return l, nil
		case errors.Is(err, ErrLocked), errors.Is(err, errExpiredOnArrival):
			tried = true
			refused = true
			contended.Store(true)
		case rideOut(err):
		default:
			return nil, giveUp(err)
		}
	}
	// Subscribe, then try again: a release between the failed try and the
	// subscription would otherwise go unnoticed. Without it we still poll,
	// and subscribe again before later tries when it failed for a transient
	// reason.
	wakeups, resubscribe, err := m.subscribe(ctx, q)
	if err != nil {
		return nil, err
	}
	// With no subscription, a head that just tried waits first.
	try := eager || (tried && wakeups != nil)
	var retryID string // set after a transfer to us whose outcome is unknown
	for {
		var retryAfter time.Duration
		queued := false // the driver queued us and will wake us: no fast polling
		if resubscribe {
			if wakeups, resubscribe, err = m.subscribe(ctx, q); err != nil {
				return nil, err
			}
		}
		if try {
			// With a Notifier, only a try made while the queue holds a
			// subscription may queue in the backend
			// (driver.Request.Wait): the subscription's Close is how the
			// driver learns that the waiter gave up. Without one, every
			// try may.
			tryFn := m.c.drv.Acquire
			if wakeups != nil || m.c.caps.Notifier == nil {
				tryFn = m.tryWaiting
			}
			l, err := m.attemptAs(ctx, mode, tryFn, retryID)
			retryID = ""
			switch {
			case err == nil:
				contended.Store(refused)
				return l, nil
			case errors.Is(err, errExpiredOnArrival):
			case errors.Is(err, ErrLocked):
				refused = true
				contended.Store(true)
				failures = 0
				if le, ok := errors.AsType[*driver.LockedError](err); ok {
					retryAfter = le.RetryAfter
					queued = le.Queued && le.RetryAfter > 0 && wakeups != nil
				}
			case rideOut(err):
			default:
				return nil, giveUp(err)
			}
		}
		try = true
		delay := backoff.next(retryAfter)
		if queued {
			delay = queuedDelay(retryAfter)
		}
		h, err := m.sleep(ctx, q, w, wakeups, backoff, delay)
		switch {
		case err != nil:
			return nil, err
		case h.dl != nil:
			l, err := m.handedOver(ctx, h, mode)
			if err == nil {
				return l, nil
			} else if !errors.Is(err, errExpiredOnArrival) {
				return nil, err
			}
		default:
			retryID = h.retryID
		}
	}
}

// subscribe returns the queue's wake-ups, or nil when it has no
// subscription: the head then polls. again reports that subscribing failed
// for a transient reason, so the head should try again before its next
// attempt. A failure is logged; err is set only when ctx ended.
func (m *mutex) subscribe(ctx context.Context, q *waitQueue) (wakeups <-chan struct{}, again bool, err error) {
	wakeups, err = m.c.subscription(ctx, q)
	switch {
	case err == nil:
		return wakeups, false, nil
	case ctx.Err() != nil:
		return nil, false, ctx.Err()
	}
	again = transient(ctx, err)
	m.c.tel.subscribeFailed(ctx, m.key, again, err)
	return nil, again, nil
}

// pause waits for d, or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// queuedDelay is how long a head that the driver queued waits for its
// wake-up before it tries again: drawn from [retryAfter/2, retryAfter], so
// that it comes back before the driver drops its place, and the waiters of
// many processes do not come back in lockstep.
func queuedDelay(retryAfter time.Duration) time.Duration {
	return retryAfter/2 + rand.N(retryAfter/2+1)
}

// sleep waits for a reason to try again: a wake-up from the backend, a
// release in this Client, or delay. When the driver can transfer
// locks, the head also offers itself meanwhile, and may come back with the
// lock itself, handed over by a lease of this Client (handoff.go); while a
// lease of this Client is known to hold the lock, only that lease's end
// wakes such a head (awaitHolder).
func (m *mutex) sleep(ctx context.Context, q *waitQueue, w *waiter, wakeups <-chan struct{}, backoff *backoff, delay time.Duration) (handoff, error) {
	cand := m.c.offer(q, w)
	var handed <-chan handoff // nil, so never ready, without an offer
	if cand != nil {
		handed = cand.result
	}
	timer := time.NewTimer(delay)
	defer timer.Stop()
	end := holdGone
	if cand != nil {
		// While a lease of this Client holds the lock, only its end
		// can free it: neither the timer nor a notification wakes the
		// head, which stays offered (awaitHolder).
		var h handoff
		switch h, end = m.c.awaitHolder(ctx, q, handed); end {
		case holdHanded:
			m.c.receive(w, cand)
			return h, nil
		case holdWake:
			backoff.reset()
		}
	}
	if end == holdGone {
		select {
		case <-ctx.Done():
		case h := <-handed:
			m.c.receive(w, cand)
			return h, nil
		case <-wakeups:
			backoff.reset()
		case <-q.kick:
			backoff.reset()
		case <-timer.C:
		}
	}
	if cand != nil {
		// An Unlock may have claimed the offer meanwhile: its outcome
		// is ours, unless ctx ends first.
		h, ok := m.c.withdraw(ctx, q, w, cand)
		switch {
		case !ok: // abandoned to the Unlock, which gives the lock back
		case h.dl != nil:
			return h, nil
		case h.retryID != "" && ctx.Err() != nil:
			m.c.giveBack(ctx, cand.req, h)
		case h.retryID != "":
			return h, nil
		}
	}
	return handoff{}, ctx.Err()
}

// opNames names operations by mode and whether they wait, for errors and
// spans.
var opNames = [2]map[bool]string{
	driver.Exclusive: {true: "lock", false: "trylock"},
	driver.Shared:    {true: "rlock", false: "tryrlock"},
}

// errExpiredOnArrival: the backend granted the lock, but its validity had run
// out by the time the reply arrived. The grant was given back; try again.
var errExpiredOnArrival = errors.New("dlock: lock granted with no validity left")

// attempt makes one acquisition through acquireFn, with a new request ID.
func (m *mutex) attempt(ctx context.Context, mode driver.Mode, acquireFn func(context.Context, driver.Request) (driver.Lease, error)) (*lease, error) {
	return m.attemptAs(ctx, mode, acquireFn, "")
}

// attemptAs makes one acquisition through acquireFn with request ID id (a
// new one when empty) and turns a grant into a lease.
func (m *mutex) attemptAs(ctx context.Context, mode driver.Mode, acquireFn func(context.Context, driver.Request) (driver.Lease, error), id string) (*lease, error) {
	if id == "" {
		var err error
		if id, err = newID(); err != nil {
			return nil, err
		}
	}
	started := time.Now()
	dl, err := acquireFn(ctx, m.request(mode, id))
	if err != nil {
		return nil, err
	}
	return m.granted(ctx, dl, started, mode)
}

// firstTry is how a head that has not subscribed yet makes its first try:
// without a Notifier as every try of a waiting Lock (tryWaiting), with one
// as a plain try, which must not queue before the subscription exists
// (driver.Request.Wait).
func (m *mutex) firstTry() func(context.Context, driver.Request) (driver.Lease, error) {
	if m.c.caps.Notifier == nil {
		return m.tryWaiting
	}
	return m.c.drv.Acquire
}

// tryWaiting is one try for a Lock that waits: the driver may queue the
// request (driver.Request.Wait).
func (m *mutex) tryWaiting(ctx context.Context, req driver.Request) (driver.Lease, error) {
	req.Wait = true
	return m.c.drv.Acquire(ctx, req)
}

// block waits in the backend's own queue (driver.Capabilities.Blocking).
func (m *mutex) block(ctx context.Context, req driver.Request) (driver.Lease, error) {
	req.Block = true
	return m.c.drv.Acquire(ctx, req)
}

// request is the driver's request for one acquisition by m.
func (m *mutex) request(mode driver.Mode, id string) driver.Request {
	return driver.Request{Key: m.key, ID: id, TTL: m.cfg.ttl, Mode: mode, Owner: m.cfg.owner, Value: m.cfg.value}
}

// handedOver turns a lock handed over by another lease of the Client into
// a lease: a transfer's grant, or the other lease's hold itself, with the
// next token of its block (handoff.go).
func (m *mutex) handedOver(ctx context.Context, h handoff, mode driver.Mode) (*lease, error) {
	if h.local == nil {
		return m.granted(ctx, h.dl, h.started, mode)
	}
	l := newLease(m, h.dl, h.started, mode)
	l.deadline, l.renewAt = h.local.deadline, h.local.renewAt
	l.offset, l.loss = h.local.offset, h.local.loss
	return m.checkArrival(ctx, l)
}

// granted turns a grant obtained by a call that started at started into a
// lease, refusing (and giving back) a grant whose validity is already over.
func (m *mutex) granted(ctx context.Context, dl driver.Lease, started time.Time, mode driver.Mode) (*lease, error) {
	return m.checkArrival(ctx, newLease(m, dl, started, mode))
}

// checkArrival returns l, or gives its lock back when its validity is
// already over.
func (m *mutex) checkArrival(ctx context.Context, l *lease) (*lease, error) {
	dl := l.d
	if !l.acquired.Before(l.Deadline()) { // acquired: the lease's arrival, just now
		cleanup, cancel := cleanupContext(ctx, m.cfg.ttl)
		defer cancel()
		if err := dl.Release(cleanup); err != nil && !errors.Is(err, ErrNotHeld) {
			return nil, fmt.Errorf("%w; giving it back failed: %w", errExpiredOnArrival, err)
		}
		return nil, errExpiredOnArrival
	}
	return l, nil
}
