package memory

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// client is one Driver over a Backend.
type client struct {
	b      *Backend
	o      options
	caps   driver.Capabilities
	closed atomic.Bool
}

func (c *client) Close() error {
	c.closed.Store(true)
	return nil
}

// enter checks that the client is open and the backend not paused.
func (c *client) enter(ctx context.Context) error {
	if c.closed.Load() {
		return driver.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return c.b.gate(ctx)
}

// errBlockUnasked: a Request with Block reached a client that does not
// declare Blocking, which the core must never send.
var errBlockUnasked = errors.New("memory: Request.Block sent to a driver that is not Blocking (WithoutBlocking)")

// Acquire tries once, or with req.Block waits in the key's queue.
func (c *client) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	if req.Block {
		if !c.caps.Blocking {
			return nil, errBlockUnasked
		}
		return c.block(ctx, req)
	}
	if err := c.enter(ctx); err != nil {
		return nil, err
	}
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	h, left := c.b.grant(req, time.Now(), c.o.tokenBlock, nil)
	if h == nil {
		return nil, &driver.LockedError{RetryAfter: left}
	}
	return c.newLease(req, h), nil
}

// block waits inside the backend until the lock is granted or ctx ends, in
// the key's queue: a free lock goes to the call that has waited longest. A
// call that ends leaves the queue, so cancelling leaves nothing behind.
func (c *client) block(ctx context.Context, req driver.Request) (driver.Lease, error) {
	t := &ticket{}
	c.b.mu.Lock()
	c.b.enqueue(req.Key, t)
	c.b.mu.Unlock()
	defer func() {
		c.b.mu.Lock()
		c.b.dequeue(req.Key, t)
		c.b.mu.Unlock()
	}()
	for {
		if err := c.enter(ctx); err != nil {
			return nil, err
		}
		c.b.mu.Lock()
		h, left := c.b.grant(req, time.Now(), c.o.tokenBlock, t)
		changed := c.b.changed
		var l driver.Lease
		if h != nil {
			l = c.newLease(req, h)
		}
		c.b.mu.Unlock()
		if l != nil {
			return l, nil
		}
		if left <= 0 {
			// Free, but an earlier call is first: its grant or its
			// leaving the queue wakes us.
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-changed:
			}
			continue
		}
		timer := time.NewTimer(left)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-changed:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// Subscribe wakes the caller at every release of any key.
func (c *client) Subscribe(ctx context.Context, key string) (driver.Subscription, error) {
	if err := c.enter(ctx); err != nil {
		return nil, err
	}
	s := &subscription{c: make(chan struct{}, 1), stop: make(chan struct{})}
	go s.run(c.b)
	return s, nil
}

// subscription forwards every change of the backend to its channel: a
// release of any key wakes every subscriber, which is harmless for a
// reference driver and exercises the core's retry path.
type subscription struct {
	c    chan struct{}
	stop chan struct{}
	once sync.Once
}

func (s *subscription) run(b *Backend) {
	for {
		b.mu.Lock()
		changed := b.changed
		b.mu.Unlock()
		select {
		case <-s.stop:
			return
		case <-changed:
			select {
			case s.c <- struct{}{}:
			default:
			}
		}
	}
}

func (s *subscription) C() <-chan struct{} { return s.c }

func (s *subscription) Close() error {
	s.once.Do(func() { close(s.stop) })
	return nil
}

// newLease makes the lease of a grant to h, reporting losses as the options
// ask. Callers hold c.b.mu.
func (c *client) newLease(req driver.Request, h *holder) driver.Lease {
	l := &lease{c: c, key: req.Key, mode: req.Mode, reentrant: req.Owner != "", identity: h.identity, token: h.token, validity: req.TTL}
	if c.o.noLossReports {
		return l // no loss to tell it of
	}
	if c.o.contextLossReports {
		w := &lossWatch{}
		w.ctx, w.cancel = context.WithCancelCause(context.Background())
		l.watch = w
	}
	h.leases = append(h.leases, l)
	return l
}

// lease is one grant as a client holds it.
type lease struct {
	c         *client
	key       string
	mode      driver.Mode
	reentrant bool // identity is the reentrant owner, not the request ID
	released  bool // Release or Transfer was called: report no loss; under c.b.mu
	identity  string
	token     uint64
	validity  time.Duration

	// Under c.b.mu: where to report the loss of the lock (nil until told,
	// and after), and the loss reported before anyone listened.
	onLoss func(reason error)
	lost   error
	// watch, with WithContextLossReports, is the lease's context that a
	// loss cancels, watched by OnLoss.
	watch *lossWatch
}

// lossWatch is a lease's context-shaped loss report: lose cancels ctx, and
// OnLoss watches it with context.AfterFunc.
type lossWatch struct {
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu      sync.Mutex
	stop    func() bool // stops the AfterFunc
	stopped bool        // the lease was let go: call nothing any more
}

// lose reports the loss of the lock, once. Callers hold c.b.mu.
func (l *lease) lose(reason error) {
	if l.lost != nil || l.released {
		return
	}
	l.lost = reason
	if l.watch != nil {
		l.watch.cancel(reason)
		return
	}
	if f := l.onLoss; f != nil {
		l.onLoss = nil
		f(reason)
	}
}

// OnLoss calls f when a fault hook (Tamper, Restart) removes the lock: at
// once when one already has. With WithContextLossReports it calls f from a
// goroutine of context.AfterFunc; WithoutLossReports, never.
func (l *lease) OnLoss(f func(reason error)) {
	if l.c.o.noLossReports {
		return
	}
	b := l.c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if l.released {
		return
	}
	if w := l.watch; w != nil {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.stop = context.AfterFunc(w.ctx, func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			if !w.stopped {
				w.stopped = true
				f(context.Cause(w.ctx))
			}
		})
		return
	}
	if l.lost != nil {
		f(l.lost)
		return
	}
	l.onLoss = f
}

// Uncertain returns nil: the in-process backend is always in touch.
func (l *lease) Uncertain() error { return nil }

// letGo marks l as released, so that it reports no loss any more: once it
// returns, the callback is never called again (a context watch's call in
// progress has ended). Callers hold c.b.mu.
func (l *lease) letGo() {
	l.released, l.onLoss = true, nil
	if w := l.watch; w != nil {
		w.mu.Lock()
		w.stopped = true
		stop := w.stop
		w.mu.Unlock()
		if stop != nil {
			stop()
		}
	}
}

func (l *lease) Token() uint64           { return l.token }
func (l *lease) Validity() time.Duration { return l.validity }

func (l *lease) Extend(ctx context.Context, ttl time.Duration) error {
	if err := l.c.enter(ctx); err != nil {
		return err
	}
	b := l.c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	_, h := b.find(l.key, l.identity, l.token, l.mode, now)
	if h == nil {
		return driver.ErrNotHeld
	}
	h.expires = now.Add(ttl)
	return nil
}

func (l *lease) Release(ctx context.Context) error {
	b := l.c.b
	if err := l.c.enter(ctx); err != nil {
		// The core lets the lease go all the same: no report after this.
		b.mu.Lock()
		l.letGo()
		b.mu.Unlock()
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	l.letGo()
	e, h := b.find(l.key, l.identity, l.token, l.mode, time.Now())
	if h == nil {
		return driver.ErrNotHeld
	}
	h.drop(l)
	if h.count--; h.count > 0 {
		return nil
	}
	if l.mode == driver.Shared {
		delete(e.shared, l.identity)
	} else {
		e.exclusive = nil
	}
	b.live(l.key, time.Now())
	b.wake()
	return nil
}

// ExtendBatch extends every lease under one lock of the backend, as a
// pipeline would in one round trip.
func (c *client) ExtendBatch(ctx context.Context, leases []driver.Lease, ttls []time.Duration) []error {
	if err := c.enter(ctx); err != nil {
		return slices.Repeat([]error{err}, len(leases))
	}
	errs := make([]error, len(leases))
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	now := time.Now()
	for i, dl := range leases {
		l := leaseOf(dl)
		if l == nil {
			errs[i] = driver.ErrNotHeld
			continue
		}
		if _, h := c.b.find(l.key, l.identity, l.token, l.mode, now); h != nil {
			h.expires = now.Add(ttls[i])
		} else {
			errs[i] = driver.ErrNotHeld
		}
	}
	return errs
}

// leaseOf returns a lease this package made, or nil.
func leaseOf(dl driver.Lease) *lease {
	l, _ := dl.(*lease)
	return l
}

// Inspect describes the lock on key. Waiters is the length of the key's
// queue of blocked Acquire calls when the driver is Blocking; otherwise -1:
// the core then waits outside the backend (by notification and polling),
// where the backend cannot count its waiters.
func (c *client) Inspect(ctx context.Context, key string) (driver.Info, error) {
	if err := c.enter(ctx); err != nil {
		return driver.Info{}, err
	}
	info := driver.Info{Waiters: -1}
	if c.caps.Blocking {
		c.b.mu.Lock()
		info.Waiters = len(c.b.queues[key])
		c.b.mu.Unlock()
	}
	in, held := c.b.Inspect(key)
	if !held {
		c.b.mu.Lock()
		info.Token = c.b.fences[key]
		c.b.mu.Unlock()
		return info, nil
	}
	info.Held, info.Token, info.TTL, info.Holders, info.Value = true, in.Token, time.Until(in.Expires), 1, in.Value
	if in.Readers > 0 {
		info.Mode, info.Holders = driver.Shared, in.Readers
	}
	return info, nil
}
