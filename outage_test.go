package dlock_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/drivers/memory"
	"github.com/dlock-go/dlock/internal/testkit"
)

// outage is fault middleware: while down is set, every acquisition (and
// subscription) fails with err, as calls to a restarting backend do, without
// reaching the backend.
type outage struct {
	driver.Driver
	err      error
	down     atomic.Bool
	failures atomic.Int64 // calls failed while down
	acquires atomic.Int64 // of which acquisitions
}

// refused is what a dial to a stopped server returns.
var refused = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}

func (d *outage) fail() error {
	if d.down.Load() {
		d.failures.Add(1)
		return d.err
	}
	return nil
}

func (d *outage) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	if err := d.fail(); err != nil {
		d.acquires.Add(1)
		return nil, err
	}
	return d.Driver.Acquire(ctx, req)
}

// Capabilities keep the wrapped driver's read-write and reentrant locks
// only.
func (d *outage) Capabilities() driver.Capabilities {
	in := d.Driver.Capabilities()
	return driver.Capabilities{Shared: in.Shared, Reentrant: in.Reentrant}
}

// blockingOutage keeps the wrapped driver's Blocking.
type blockingOutage struct{ *outage }

func (d blockingOutage) Capabilities() driver.Capabilities {
	caps := d.outage.Capabilities()
	caps.Blocking = true
	return caps
}

// notifyingOutage keeps the wrapped driver's Notifier.
type notifyingOutage struct{ *outage }

func (d notifyingOutage) Capabilities() driver.Capabilities {
	caps := d.outage.Capabilities()
	caps.Notifier = d
	return caps
}

func (d notifyingOutage) Subscribe(ctx context.Context, key string) (driver.Subscription, error) {
	if err := d.fail(); err != nil {
		return nil, err
	}
	return d.Driver.Capabilities().Notifier.Subscribe(ctx, key)
}

// outageShapes are the ways the core waits: by polling, with
// notifications, and in the backend's own queue.
var outageShapes = map[string]func(b *memory.Backend, err error) (*outage, driver.Driver){
	"Polling": func(b *memory.Backend, err error) (*outage, driver.Driver) {
		o := &outage{Driver: memory.New(b, memory.WithoutBlocking(), memory.WithoutNotifications()), err: err}
		return o, o
	},
	"Notifications": func(b *memory.Backend, err error) (*outage, driver.Driver) {
		o := &outage{Driver: memory.New(b, memory.WithoutBlocking()), err: err}
		return o, notifyingOutage{o}
	},
	"Blocking": func(b *memory.Backend, err error) (*outage, driver.Driver) {
		o := &outage{Driver: memory.New(b, memory.WithoutNotifications()), err: err}
		return o, blockingOutage{o}
	},
}

// A Lock that waits while the backend is unreachable keeps waiting, reports
// each failure, and gets the lock once the backend is back.
func TestLockWaitsThroughOutage(t *testing.T) {
	for name, shape := range outageShapes {
		t.Run(name, func(t *testing.T) {
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			defer mp.Shutdown(context.Background())
			var logs testkit.Buffer
			logger := slog.New(slog.NewTextHandler(&logs, nil))

			b := memory.NewBackend()
			o, d := shape(b, refused)
			c := newClientOver(t, d, dlock.WithTTL(5*time.Second), dlock.WithPolling(time.Millisecond, 20*time.Millisecond),
				dlock.WithLogger(logger), dlock.WithMeterProvider(mp))
			held := hold(t, memory.New(b), "outage").held // by another client

			o.down.Store(true)
			m, _ := c.Mutex("outage")
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			type result struct {
				l   dlock.Lease
				err error
			}
			got := make(chan result, 1)
			go func() {
				l, err := m.Lock(ctx)
				got <- result{l, err}
			}()
			waitUntil(t, "three failed attempts", func() bool { return o.acquires.Load() >= 3 })
			if err := held.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
			select {
			case r := <-got:
				t.Fatalf("Lock returned during the outage: %v, %v", r.l, r.err)
			default:
			}
			o.down.Store(false) // the backend is back
			r := <-got
			if r.err != nil {
				t.Fatalf("Lock after the outage: %v", r.err)
			}
			if err := r.l.Unlock(t.Context()); err != nil {
				t.Errorf("Unlock: %v", err)
			}

			if n := strings.Count(logs.String(), "backend unavailable"); n < 3 {
				t.Errorf("logged %d transient errors, want at least 3:\n%s", n, logs.String())
			}
			if !strings.Contains(logs.String(), "connection refused") {
				t.Errorf("logs do not name the error:\n%s", logs.String())
			}
			if n := counterSum(t, reader, "dlock.acquire.errors"); n < 3 {
				t.Errorf("dlock.acquire.errors = %d, want at least 3", n)
			}
		})
	}
}

// counterSum is the total of the Int64 counter name.
func counterSum(t *testing.T, reader *sdkmetric.ManualReader, name string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == name {
				for _, p := range sum.DataPoints {
					n += p.Value
				}
			}
		}
	}
	return n
}

// Through an outage, a waiting Lock still returns exactly ctx.Err() when its
// context ends, and ErrClosed when its Client closes.
func TestLockInOutageEndsWithContextOrClose(t *testing.T) {
	for name, shape := range outageShapes {
		t.Run(name, func(t *testing.T) {
			o, d := shape(memory.NewBackend(), refused)
			o.down.Store(true)
			c, err := dlock.New(d, dlock.WithPolling(time.Millisecond, 10*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			m, _ := c.Mutex("outage")
			ctx, cancel := context.WithCancel(t.Context())
			got := make(chan error, 1)
			go func() {
				_, err := m.Lock(ctx)
				got <- err
			}()
			waitUntil(t, "a failed attempt", func() bool { return o.failures.Load() >= 1 })
			cancel()
			if err := <-got; err != context.Canceled {
				t.Errorf("Lock after cancel: got %v, want exactly context.Canceled", err)
			}

			go func() {
				_, err := m.Lock(t.Context())
				got <- err
			}()
			before := o.failures.Load()
			waitUntil(t, "another failed attempt", func() bool { return o.failures.Load() > before })
			if err := c.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
			if err := <-got; !errors.Is(err, dlock.ErrClosed) {
				t.Errorf("Lock after Close: got %v, want ErrClosed", err)
			}
		})
	}
}

// Errors that waiting cannot cure come back at once, and so does every
// error with WithFailFast, and from TryLock.
func TestPermanentErrorsReturnAtOnce(t *testing.T) {
	wrongPassword := errors.New("WRONGPASS invalid username-password pair or user is disabled")
	cases := []struct {
		name string
		err  error
		opts []dlock.Option
	}{
		{"WrongPassword", wrongPassword, nil},
		{"Unsupported", errors.ErrUnsupported, nil},
		{"InvalidKey", dlock.ErrInvalidKey, nil},
		{"DriverClosed", dlock.ErrClosed, nil},
		{"FailFast", refused, []dlock.Option{dlock.WithFailFast()}},
	}
	for shapeName, shape := range outageShapes {
		for _, tc := range cases {
			t.Run(shapeName+"/"+tc.name, func(t *testing.T) {
				o, d := shape(memory.NewBackend(), tc.err)
				o.down.Store(true)
				c, err := dlock.New(d, tc.opts...)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close(t.Context())
				m, _ := c.Mutex("permanent")
				// A context that never ends: only the error can end the call.
				if _, err := m.Lock(context.Background()); !errors.Is(err, tc.err) {
					t.Errorf("Lock: got %v, want %v", err, tc.err)
				}
				if _, err := m.TryLock(context.Background()); !errors.Is(err, tc.err) {
					t.Errorf("TryLock: got %v, want %v", err, tc.err)
				}
			})
		}
	}
	t.Run("TryLockInOutage", func(t *testing.T) {
		o, d := outageShapes["Polling"](memory.NewBackend(), refused)
		o.down.Store(true)
		c, _ := dlock.New(d)
		defer c.Close(t.Context())
		m, _ := c.Mutex("trylock")
		if _, err := m.TryLock(context.Background()); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("TryLock: got %v, want connection refused at once", err)
		}
	})
}

// transientByMethod is an error that a driver marks as transient.
type transientByMethod struct{}

func (transientByMethod) Error() string   { return "LOADING the server is loading its data" }
func (transientByMethod) Transient() bool { return true }

// A driver's own "not ready yet" error, marked with Transient, is waited
// through like a refused connection.
func TestLockWaitsThroughMarkedError(t *testing.T) {
	b := memory.NewBackend()
	o, d := outageShapes["Polling"](b, transientByMethod{})
	o.down.Store(true)
	c, _ := dlock.New(d, dlock.WithPolling(time.Millisecond, 10*time.Millisecond))
	defer c.Close(t.Context())
	m, _ := c.Mutex("marked")
	got := lockAndUnlock(t.Context(), m.Lock)
	waitUntil(t, "three failed attempts", func() bool { return o.failures.Load() >= 3 })
	o.down.Store(false)
	if err := <-got; err != nil {
		t.Fatalf("Lock: %v", err)
	}
}

// sqlError is an SQL driver's error with its SQLSTATE.
type sqlError struct{ code string }

func (e sqlError) Error() string    { return "server error (SQLSTATE " + e.code + ")" }
func (e sqlError) SQLState() string { return e.code }

// A database shutting down or starting up is an outage; a wrong password is
// not.
func TestSQLStateClassification(t *testing.T) {
	for code, wantWait := range map[string]bool{"57P03": true, "57P01": true, "08006": true, "28P01": false, "42501": false} {
		t.Run(code, func(t *testing.T) {
			o, d := outageShapes["Polling"](memory.NewBackend(), sqlError{code})
			o.down.Store(true)
			c, _ := dlock.New(d, dlock.WithPolling(time.Millisecond, 10*time.Millisecond))
			defer c.Close(t.Context())
			m, _ := c.Mutex("sqlstate")
			got := lockAndUnlock(t.Context(), m.Lock)
			if !wantWait {
				if err := <-got; !errors.As(err, new(sqlError)) {
					t.Errorf("Lock: got %v, want SQLSTATE %s at once", err, code)
				}
				return
			}
			waitUntil(t, "three failed attempts", func() bool { return o.failures.Load() >= 3 })
			o.down.Store(false)
			if err := <-got; err != nil {
				t.Errorf("Lock after the outage: %v", err)
			}
		})
	}
}

// RLock waits through an outage as Lock does.
func TestRLockWaitsThroughOutage(t *testing.T) {
	b := memory.NewBackend()
	o, d := outageShapes["Notifications"](b, refused)
	c, _ := dlock.New(d, dlock.WithPolling(time.Millisecond, 10*time.Millisecond))
	defer c.Close(t.Context())
	rw := testkit.RWMutex(t, c, "rlock-outage")
	o.down.Store(true)
	got := lockAndUnlock(t.Context(), rw.RLock)
	waitUntil(t, "three failed attempts", func() bool { return o.acquires.Load() >= 3 })
	o.down.Store(false)
	if err := <-got; err != nil {
		t.Fatalf("RLock after the outage: %v", err)
	}
}

// waitWatcher is a notifying driver that counts the acquisitions it sees,
// those with driver.Request.Wait set apart, and whose Subscribe fails with
// subErr when it is set.
type waitWatcher struct {
	driver.Driver
	subErr   error
	tries    atomic.Int64
	waiting  atomic.Int64
	subTries atomic.Int64
}

// Capabilities: the Notifier below only.
func (d *waitWatcher) Capabilities() driver.Capabilities {
	return driver.Capabilities{Notifier: d}
}

func (d *waitWatcher) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	d.tries.Add(1)
	if req.Wait {
		d.waiting.Add(1)
	}
	return d.Driver.Acquire(ctx, req)
}

func (d *waitWatcher) Subscribe(ctx context.Context, key string) (driver.Subscription, error) {
	d.subTries.Add(1)
	if d.subErr != nil {
		return nil, d.subErr
	}
	return d.Driver.Capabilities().Notifier.Subscribe(ctx, key)
}

// driver.Request.Wait is set only while the waiter holds a subscription for
// the key: its Close is how a driver that queues waiters learns that one
// gave up. When subscribing fails (a user without permission for the
// channel), the waiter polls with plain tries.
func TestNoWaitRequestsWithoutSubscription(t *testing.T) {
	noPermission := errors.New("NOPERM User has no permissions to access the channel")
	for name, tc := range map[string]struct {
		subErr   error
		wantWait bool
	}{
		"SubscribeFails": {noPermission, false},
		"Subscribed":     {nil, true}, // the control: the test sees Wait when it is sent
	} {
		t.Run(name, func(t *testing.T) {
			b := memory.NewBackend()
			d := &waitWatcher{Driver: memory.New(b, memory.WithoutBlocking()), subErr: tc.subErr}
			c := newClientOver(t, d, dlock.WithPolling(time.Millisecond, 5*time.Millisecond))
			held := hold(t, memory.New(b), "wait-flag").held // by another client

			m, _ := c.Mutex("wait-flag")
			got := lockAndUnlock(t.Context(), m.Lock)
			waitUntil(t, "five tries while the lock is held", func() bool { return d.tries.Load() >= 5 })
			if err := held.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Fatalf("Lock: %v", err)
			}
			if waited := d.waiting.Load() > 0; waited != tc.wantWait {
				t.Errorf("requests with Wait: %d of %d tries, want some: %v", d.waiting.Load(), d.tries.Load(), tc.wantWait)
			}
			if tc.subErr != nil && d.subTries.Load() != 1 {
				t.Errorf("subscribed %d times after a permanent refusal, want once", d.subTries.Load())
			}
		})
	}
}
