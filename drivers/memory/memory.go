// Package memory is dlock's in-process reference driver.
//
// It implements every capability of the driver contract, so it runs the whole
// conformance suite in seconds, tests the core without Docker, and backs the
// runnable examples. It is the embedded default: "mem://NAME" opens a client
// of the process-wide Backend called NAME, so that clients opened with the
// same URL contend for the same locks, as processes sharing a server would.
// It is not a stand-in for a backend in anyone's tests: it locks within one
// process only.
//
// # Capabilities
//
// All of them by default: read-write and reentrant locks, server-side
// waiting (Blocker), release notifications (Notifier), and loss reports
// (LossNotifier, or LossReporter on request) when a fault hook removes a
// lock. Options switch each off, so
// that the core's fallbacks can be tested against it too. Blocks of fencing
// tokens (driver.TokenBlocker) are on request: WithTokenBlocks.
//
// # Guarantees
//
// Fencing tokens rise by one per grant of a key (by the block size, with
// WithTokenBlocks), for the life of the Backend (Restart keeps them).
// Blocked Acquire calls wait in a queue per key, and a free lock goes to the
// call that has waited longest; TryAcquire neither queues nor jumps the
// queue. Readers join readers that hold the key only while nobody waits.
package memory

import (
	"context"
	"fmt"
	"net/url"
	"sync"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// Option switches off a capability of a Driver.
type Option func(*options)

type options struct {
	noBlocking, noNotify, noLossReports, contextLossReports bool
	tokenBlock                                              uint64
}

// WithoutBlocking makes the Driver lack driver.Blocker, so the core waits by
// notifications and polling.
func WithoutBlocking() Option { return func(o *options) { o.noBlocking = true } }

// WithoutNotifications makes the Driver lack driver.Notifier, so the core
// falls back to polling.
func WithoutNotifications() Option { return func(o *options) { o.noNotify = true } }

// WithoutLossReports makes leases lack driver.LossNotifier, so the core finds
// losses by renewal only.
func WithoutLossReports() Option { return func(o *options) { o.noLossReports = true } }

// WithContextLossReports makes leases report losses through
// driver.LossReporter (a context per lease) instead of driver.LossNotifier,
// as drivers whose backend client hands out contexts do, so that the core's
// support of it is tested too.
func WithContextLossReports() Option { return func(o *options) { o.contextLossReports = true } }

// WithTokenBlocks makes each new grant reserve n fencing tokens
// (driver.TokenBlocker), so that the core can hand a lock to another
// goroutine of the same Client without the backend. The core does so only
// when the driver lacks driver.Blocker (see WithoutBlocking): a waiter that
// waits inside the backend cannot take a handover.
func WithTokenBlocks(n uint64) Option { return func(o *options) { o.tokenBlock = n } }

// New returns a client of b, independent of every other Driver on b. Its
// capabilities are those the options leave on.
func New(b *Backend, opts ...Option) driver.Driver {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	c := &client{b: b, o: o}
	switch {
	case !o.noBlocking && !o.noNotify:
		return &full{c}
	case !o.noBlocking:
		return &blocking{c}
	case !o.noNotify:
		return &notifying{c}
	}
	return c
}

// The capability sets a Driver can have, as types, because the core learns
// capabilities by type assertion.
type (
	full      struct{ *client }
	blocking  struct{ *client }
	notifying struct{ *client }
)

func (d *full) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	return d.acquire(ctx, req)
}

func (d *full) Subscribe(ctx context.Context, key string) (driver.Subscription, error) {
	return d.subscribe(ctx, key)
}

func (d *blocking) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	return d.acquire(ctx, req)
}

func (d *notifying) Subscribe(ctx context.Context, key string) (driver.Subscription, error) {
	return d.subscribe(ctx, key)
}

var (
	_ driver.Blocker      = (*full)(nil)
	_ driver.Notifier     = (*full)(nil)
	_ driver.Featurer     = (*client)(nil)
	_ driver.Validator    = (*client)(nil)
	_ driver.TokenBlocker = (*client)(nil)
)

// TokenBlock returns how many fencing tokens each new grant reserves: 1
// unless WithTokenBlocks says more.
func (c *client) TokenBlock() uint64 { return max(c.o.tokenBlock, 1) }

var backends = struct {
	sync.Mutex
	byName map[string]*Backend
}{byName: map[string]*Backend{}}

// Named returns the process-wide Backend called name, creating it on first
// use. Open("mem://NAME") uses it.
func Named(name string) *Backend {
	backends.Lock()
	defer backends.Unlock()
	b := backends.byName[name]
	if b == nil {
		b = NewBackend()
		backends.byName[name] = b
	}
	return b
}

// Scheme is the URL scheme this package registers: "mem://NAME".
const Scheme = "mem"

func init() {
	dlock.Register(Scheme, func(_ context.Context, u *url.URL) (driver.Driver, error) {
		if u.Opaque != "" || u.User != nil || u.Port() != "" || (u.Path != "" && u.Path != "/") {
			return nil, fmt.Errorf("%w: want mem://NAME, got %q", dlock.ErrInvalidURL, u.Redacted())
		}
		name := u.Hostname()
		if name == "" {
			name = "default"
		}
		return New(Named(name)), nil
	})
}
