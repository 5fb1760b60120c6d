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

	// closing is cancelled by Close; every wait watches it.
	closing     context.Context
	stopClosing context.CancelFunc
	// abandon is cancelled when Close's own context ends while it waits
	// for operations in flight: Unlock's releases and transfers then give
	// up, and their locks end by their TTL.
	abandon     context.Context
	stopAbandon context.CancelFunc

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
	c.abandon, c.stopAbandon = context.WithCancel(context.Background())
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
	c.renewer.stop()
	// In-flight acquisitions see closing and give up; renewals finish;
	// Unlock calls finish their release or transfer, cut short if ctx
	// ends first.
	stopWatch := context.AfterFunc(ctx, c.stopAbandon)
	c.ops.Wait()
	stopWatch()
	defer c.stopAbandon()

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
// Close gives up waiting for operations in flight.
func (c *Client) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(c.abandon, func() { cancel(ErrClosed) })
	return ctx, func() {
		stop()
		cancel(nil)
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
