package dlock

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"

	"github.com/dlock-go/dlock/driver"
)

// Client is one connection to a lock backend, and the core's machinery over
// it: validation, waiting, renewal and loss signalling. Make one per process
// and backend, with Open or New, and share it: it is safe for concurrent use.
type Client struct {
	drv      driver.Driver
	defaults config
	// caps is what the driver declared, read once by New. Its Transferer
	// hands locks to waiters of this Client directly, and its TokenBlock
	// (when above 1) lets the core do so without asking the backend
	// (handoff.go).
	caps driver.Capabilities

	// closing is cancelled by Close; the waits that have no operation's
	// context watch it.
	closing     context.Context
	stopClosing context.CancelFunc

	renewer renewer
	tel     *telemetry

	// qmu guards the wait queues and the handoffs' states; mu guards
	// closed, leases and ops. Both are leaves (the lock order: handoff.go).
	qmu    sync.Mutex
	queues map[string][]*waitQueue // waiters by key; see waitqueue.go
	idle   map[queueID]idleSub     // left by a queue whose last waiter holds the lock
	// watchers are woken by kick: semaphores' gate holders waiting for
	// one of the keys (semaphore_wait.go).
	watchers map[string][]chan<- struct{}
	// observeHandoff, when set (by tests, before any Lock), sees every
	// transition of the Client's handoffs (handoff.go).
	observeHandoff func(from handoffState, ev handoffEvent, to handoffState)
	// contended says which keys' latest Lock had to wait (contention.go).
	contended contention

	mu     sync.Mutex
	closed bool
	leases map[*lease]struct{}
	ops    sync.WaitGroup // acquisitions and renewals in flight
	// acquiring are the contexts of acquisitions in flight, which Close
	// cancels; releasing those of Unlock's releases and transfers, which
	// Close cancels when its own context ends while it waits for them
	// (their locks then end by their TTL). Under mu.
	acquiring, releasing opCuts
}

// opCuts is a set of operations' contexts that Close cancels, with
// ErrClosed as the cause, all at once. It stands for a context.AfterFunc on
// a Client-wide context per operation, which cost three allocations each,
// on every Lock and every Unlock. A context's place is a slot, reused once
// free: no hashing, and no allocation once the set has grown to the
// number of operations in flight.
type opCuts struct {
	cut     bool                      // cancelled: contexts watched since are cancelled at once
	cancels []context.CancelCauseFunc // by slot; nil when free
	free    []int                     // the free slots
}

// New makes a Client over a driver, usually one made by a driver package's
// own constructor over a backend client the caller owns. Options set the
// defaults of every Mutex of the Client.
func New(d driver.Driver, opts ...Option) (*Client, error) {
	if d == nil {
		return nil, fmt.Errorf("%w: nil driver", ErrInvalidOption)
	}
	defaults, err := defaultConfig().with(opts)
	if err != nil {
		return nil, err
	}
	c := &Client{drv: d, defaults: defaults, leases: map[*lease]struct{}{}, queues: map[string][]*waitQueue{}, idle: map[queueID]idleSub{}}
	c.contended.seed = maphash.MakeSeed()
	c.caps = d.Capabilities()
	if err := c.caps.Check(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	c.renewer.init(c)
	c.tel = newTelemetry(defaults)
	c.closing, c.stopClosing = context.WithCancel(context.Background())
	return c, nil
}

// Mutex returns the exclusive lock named key. Options override the Client's
// defaults for this Mutex only. It fails with ErrInvalidKey, ErrInvalidTTL or
// ErrInvalidOption on bad input, with an error wrapping errors.ErrUnsupported
// when an option needs a capability the driver lacks, and with ErrClosed after
// Close.
func (c *Client) Mutex(key string, opts ...Option) (Mutex, error) {
	return c.newMutex(key, opts)
}

// RWMutex returns the reader/writer lock named key. Its write lock is the same
// lock as Mutex(key) takes. It needs a driver with read-write locks; others
// return an error wrapping errors.ErrUnsupported.
func (c *Client) RWMutex(key string, opts ...Option) (RWMutex, error) {
	if !c.caps.Shared {
		return nil, fmt.Errorf("dlock: read-write locks: %w by this driver", errors.ErrUnsupported)
	}
	return c.newMutex(key, opts)
}

func (c *Client) newMutex(key string, opts []Option) (*mutex, error) {
	if c.isClosed() {
		return nil, ErrClosed
	}
	base := c.defaults
	base.clientLevel = false
	cfg, err := base.with(opts)
	if err != nil {
		return nil, err
	}
	if cfg.clientLevel {
		return nil, fmt.Errorf("%w: WithLogger, WithMeterProvider and WithTracerProvider configure a Client, not a Mutex", ErrInvalidOption)
	}
	if err := validate(c.caps, key, cfg.ttl); err != nil {
		return nil, err
	}
	if cfg.owner != "" && !c.caps.Reentrant {
		return nil, fmt.Errorf("dlock: reentrant locks (WithOwner): %w by this driver", errors.ErrUnsupported)
	}
	if !cfg.pollCustom {
		cfg.pollMin, cfg.pollMax = defaultPollMin, defaultPollMax
		if c.caps.Notifier != nil {
			cfg.pollMin, cfg.pollMax = defaultNotifiedPollMin, defaultNotifiedPollMax
		}
	}
	return &mutex{c: c, key: key, cfg: cfg}, nil
}

// Close releases every lease the Client still holds, stops renewal, and
// closes the driver (and with it any backend client that Open made; a client
// the caller passed to a driver constructor stays open). Waiting Lock calls
// return ErrClosed. Close waits for the Unlock calls in flight to finish
// their release or transfer before it closes the driver. ctx bounds the
// releases, its own and those of Unlock calls in flight: leases not released
// by then end by their TTL. Calls after the first return nil.
func (c *Client) Close(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.stopClosing()
	c.cut(&c.acquiring)
	c.renewer.stop()
	// In-flight acquisitions see closing and give up; renewals finish;
	// Unlock calls finish their release or transfer, cut short if ctx
	// ends first.
	stopWatch := context.AfterFunc(ctx, func() { c.cut(&c.releasing) })
	c.ops.Wait()
	stopWatch()
	defer c.cut(&c.releasing)

	c.mu.Lock()
	held := make([]*lease, 0, len(c.leases))
	for l := range c.leases {
		held = append(held, l)
	}
	c.mu.Unlock()
	var errs []error
	for _, l := range held {
		if err := l.end(ctx, ErrClosed); err != nil && !errors.Is(err, ErrNotHeld) {
			errs = append(errs, err)
		}
	}
	// The subscriptions are closed outside c.qmu, which is never held
	// across a call to the backend (handoff.go).
	c.qmu.Lock()
	idle := make([]driver.Subscription, 0, len(c.idle))
	for id, s := range c.idle {
		if s.sub != nil { // kept for its lease alone (waitqueue.go)
			idle = append(idle, s.sub)
		}
		delete(c.idle, id)
	}
	c.qmu.Unlock()
	for _, sub := range idle {
		_ = sub.Close()
	}
	errs = append(errs, c.drv.Close())
	return errors.Join(errs...)
}

// bound returns ctx, also cancelled (with ErrClosed as its cause) when a
// Close gives up waiting for operations in flight. The caller ends it with
// unbound.
func (c *Client) bound(ctx context.Context) (context.Context, watched) {
	ctx, cancel := context.WithCancelCause(ctx)
	return ctx, c.watch(&c.releasing, cancel)
}

// unbound ends a context that bound returned.
func (c *Client) unbound(w watched) {
	c.unwatch(&c.releasing, w)
	w.cancel(nil)
}

// watched is a context's place in an opCuts, and its cancel.
type watched struct {
	cancel context.CancelCauseFunc
	slot   int // -1: not in the set, cancelled at once
}

// watch puts a context, cancelled by cancel, into s; when s was already
// cut, it cancels it at once instead.
func (c *Client) watch(s *opCuts, cancel context.CancelCauseFunc) watched {
	c.mu.Lock()
	if s.cut {
		c.mu.Unlock()
		cancel(ErrClosed)
		return watched{cancel, -1}
	}
	var slot int
	if n := len(s.free); n > 0 {
		slot, s.free = s.free[n-1], s.free[:n-1]
		s.cancels[slot] = cancel
	} else {
		slot = len(s.cancels)
		s.cancels = append(s.cancels, cancel)
	}
	c.mu.Unlock()
	return watched{cancel, slot}
}

// unwatch takes w out of s; after a cut, its slot is gone already.
func (c *Client) unwatch(s *opCuts, w watched) {
	if w.slot < 0 {
		return
	}
	c.mu.Lock()
	if !s.cut {
		s.cancels[w.slot] = nil
		s.free = append(s.free, w.slot)
	}
	c.mu.Unlock()
}

// cut cancels the contexts in s, and those put into it later, with
// ErrClosed as the cause. The cancels run outside c.mu, a leaf.
func (c *Client) cut(s *opCuts) {
	c.mu.Lock()
	s.cut = true
	cancels := s.cancels
	s.cancels, s.free = nil, nil
	c.mu.Unlock()
	for _, cancel := range cancels {
		if cancel != nil {
			cancel(ErrClosed)
		}
	}
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// beginOp registers an operation that Close must wait for; false after Close.
func (c *Client) beginOp() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.ops.Add(1)
	return true
}

// track registers a granted lease so that Close releases it; false after
// Close, in which case the caller must release the lease itself.
func (c *Client) track(l *lease) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.leases[l] = struct{}{}
	return true
}

func (c *Client) untrack(l *lease) {
	c.mu.Lock()
	delete(c.leases, l)
	c.mu.Unlock()
}
