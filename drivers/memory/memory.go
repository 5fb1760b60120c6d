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
// By default: Shared, Reentrant, Blocking, Notifier, BatchExtender,
// AnyAcquirer, Inspector, Values, and loss reports through Lease.OnLoss when a fault hook
// (Tamper, Restart) removes a lock. Options change the set, so that the
// core's fallbacks can be tested against it too:
//   - WithoutBlocking: not Blocking, and a Transferer instead (a Blocking
//     driver cannot declare one, see driver.Capabilities.Check);
//   - WithoutNotifications: no Notifier;
//   - WithoutAnyAcquirer: no AnyAcquirer (a semaphore tries its permits one
//     at a time);
//   - WithoutLossReports: leases report nothing (as with driver.NoReports);
//   - WithContextLossReports: leases report through a context per lease,
//     watched with context.AfterFunc;
//   - WithTokenBlocks(n): TokenBlock n, together with WithoutBlocking only
//     (dlock.New refuses a Blocking driver with a TokenBlock).
//
// # Guarantees
//
// Fencing tokens rise by one per grant of a key (by the block size, with
// WithTokenBlocks), for the life of the Backend (Restart keeps them).
// Blocked Acquire calls (Request.Block) wait in a queue per key, and a free
// lock goes to the call that has waited longest; a single try neither queues
// nor jumps the queue. Readers join readers that hold the key only while
// nobody waits.
package memory

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/urlparams"
)

// Option changes the capabilities of a Driver.
type Option func(*options)

type options struct {
	noBlocking, noNotify, noAnyAcquirer, noLossReports, contextLossReports bool
	tokenBlock                                                             uint64
}

// WithoutBlocking makes the Driver not Blocking, so the core waits by
// notifications and polling, and gives it a Transferer, which a Blocking
// driver cannot have.
func WithoutBlocking() Option { return func(o *options) { o.noBlocking = true } }

// WithoutNotifications makes the Driver lack a Notifier, so the core falls
// back to polling.
func WithoutNotifications() Option { return func(o *options) { o.noNotify = true } }

// WithoutAnyAcquirer makes the Driver lack an AnyAcquirer, so a semaphore
// tries its permits' locks one request at a time.
func WithoutAnyAcquirer() Option { return func(o *options) { o.noAnyAcquirer = true } }

// WithoutLossReports makes leases report no loss through Lease.OnLoss, so
// the core finds losses by renewal only.
func WithoutLossReports() Option { return func(o *options) { o.noLossReports = true } }

// WithContextLossReports makes each lease keep a context that its loss
// cancels, and report through Lease.OnLoss by watching it with
// context.AfterFunc (stopped by Release), as drivers whose backend client
// hands out a context per lock do, so that this way of reporting (from a
// goroutine of its own) is tested too.
func WithContextLossReports() Option { return func(o *options) { o.contextLossReports = true } }

// WithTokenBlocks makes each new grant reserve n fencing tokens
// (driver.Capabilities.TokenBlock), so that the core can hand a lock to
// another goroutine of the same Client without the backend. It needs
// WithoutBlocking: a waiter that waits inside the backend cannot take a
// handover, and dlock.New refuses a Blocking driver with a TokenBlock.
func WithTokenBlocks(n uint64) Option { return func(o *options) { o.tokenBlock = n } }

// New returns a client of b, independent of every other Driver on b. Its
// capabilities are those the options leave on.
func New(b *Backend, opts ...Option) driver.Driver {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	c := &client{b: b, o: o}
	c.caps = driver.Capabilities{
		Shared:        true,
		Reentrant:     true,
		Blocking:      !o.noBlocking,
		BatchExtender: c,
		Inspector:     c,
		Values:        true,
	}
	if !o.noNotify {
		c.caps.Notifier = c
	}
	if !o.noAnyAcquirer {
		c.caps.AnyAcquirer = c
	}
	if o.noBlocking {
		c.caps.Transferer = c
	}
	if o.tokenBlock > 1 {
		c.caps.TokenBlock = o.tokenBlock
	}
	return c
}

var (
	_ driver.Notifier      = (*client)(nil)
	_ driver.BatchExtender = (*client)(nil)
	_ driver.Transferer    = (*client)(nil)
	_ driver.AnyAcquirer   = (*client)(nil)
	_ driver.Inspector     = (*client)(nil)
)

// Capabilities returns what the options left on (see the package doc). Keys
// and TTLs: every one the core accepts, since the backend is a map.
func (c *client) Capabilities() driver.Capabilities { return c.caps }

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
	// Through urlparams.Opener, as every backend, so that connect_timeout
	// is read and checked the same way here, where nothing is dialled.
	dlock.Register(Scheme, urlparams.Opener(func(_ context.Context, u *url.URL, _ time.Duration) (driver.Driver, error) {
		if u.Opaque != "" || u.User != nil || u.Port() != "" || (u.Path != "" && u.Path != "/") {
			return nil, fmt.Errorf("%w: want mem://NAME, got %q", dlock.ErrInvalidURL, u.Redacted())
		}
		name := u.Hostname()
		if name == "" {
			name = "default"
		}
		return New(Named(name)), nil
	}))
}
