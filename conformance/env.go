package conformance

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// env is what every case of one Run shares.
type env struct {
	h   Harness
	ttl time.Duration
	// caps are the driver's, as a probe driver declared them. The probe is
	// closed: use its facts, and whether a behaviour is nil, never the
	// behaviours themselves (take them from a driver of the case).
	caps  driver.Capabilities
	run   string // distinguishes this Run's keys from any other's
	slack time.Duration
	keys  atomic.Uint64
}

// baseSlack is added to every timing bound, so that a loaded machine
// running with -race does not fail a correct driver; Harness.ExpiryLag adds
// to it.
const baseSlack = time.Second

func newEnv(h Harness, probe driver.Driver) *env {
	e := &env{h: h, ttl: h.TTL, run: rand.Text()[:8], slack: baseSlack + h.ExpiryLag}
	e.caps = probe.Capabilities()
	return e
}

// key returns a key no other case or Run uses.
func (e *env) key(name string) string {
	return fmt.Sprintf("conformance/%s/%s/%d", e.run, name, e.keys.Add(1))
}

// driver makes a new client of the backend, closed when the case ends.
func (e *env) driver(t *T) driver.Driver {
	d, err := e.h.NewDriver(t.Context())
	if err != nil {
		t.Fatalf("NewDriver: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// client makes a dlock.Client over a new driver, optionally wrapped by the
// suite's fault middleware, closed when the case ends.
func (e *env) client(t *T, wrap ...func(driver.Driver) driver.Driver) *dlock.Client {
	d := e.driver(t)
	for _, w := range wrap {
		d = w(d)
	}
	c, err := dlock.New(d, dlock.WithTTL(e.ttl))
	if err != nil {
		t.Fatalf("dlock.New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), e.ttl+e.slack)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c
}

func (e *env) mutex(t *T, c *dlock.Client, key string, opts ...dlock.Option) dlock.Mutex {
	m, err := c.Mutex(key, opts...)
	if err != nil {
		t.Fatalf("Mutex(%q): %v", key, err)
	}
	return m
}

func (e *env) rwmutex(t *T, c *dlock.Client, key string, opts ...dlock.Option) dlock.RWMutex {
	m, err := c.RWMutex(key, opts...)
	if err != nil {
		t.Fatalf("RWMutex(%q): %v", key, err)
	}
	return m
}

// lockWithin locks m, failing t when the lock is not granted within d;
// what names the Lock in the message.
func lockWithin(t *T, m dlock.Mutex, d time.Duration, what string) dlock.Lease {
	ctx, cancel := contextWithTimeout(t, d)
	defer cancel()
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatalf("%s: got %v, want the lock within %v", what, err, d)
	}
	return l
}

// lock takes m or fails the case.
func lock(t *T, m dlock.Mutex) dlock.Lease {
	l, err := m.Lock(t.Context())
	if err != nil {
		t.Fatalf("Lock(%q): %v", m.Key(), err)
	}
	return l
}

// unlock releases l or fails the case.
func unlock(t *T, l dlock.Lease) {
	if err := l.Unlock(t.Context()); err != nil {
		t.Errorf("Unlock(%q): %v", l.Key(), err)
	}
}

// expectLocked checks that m cannot be taken now. When it can, the failure
// describes the leases of holders, if given: whether the holder had lost
// its lease (a liveness failure) or still trusted it (two holders at once)
// is what a reader of the failure needs first.
func expectLocked(t *T, m dlock.Mutex, why string, holders ...dlock.Lease) {
	l, err := m.TryLock(t.Context())
	if err == nil {
		_ = l.Unlock(t.Context())
		var state strings.Builder
		for _, h := range holders {
			fmt.Fprintf(&state, "; the holder's lease (token %d): Err %v, Uncertain %v, Deadline in %v",
				h.Token(), h.Err(), h.Uncertain(), time.Until(h.Deadline()).Round(time.Millisecond))
		}
		t.Fatalf("TryLock(%q) succeeded, want ErrLocked: %s%s", m.Key(), why, state.String())
	}
	if !errors.Is(err, dlock.ErrLocked) {
		t.Fatalf("TryLock(%q): got %v, want ErrLocked: %s", m.Key(), err, why)
	}
}

// expectFree checks that m can be taken now, and gives it back.
func expectFree(t *T, m dlock.Mutex, why string) {
	l, err := m.TryLock(t.Context())
	if err != nil {
		t.Fatalf("TryLock(%q): got %v, want success: %s", m.Key(), err, why)
	}
	unlock(t, l)
}

// within waits for ch to close, failing the case after d.
func within(t *T, ch <-chan struct{}, d time.Duration, what string) {
	select {
	case <-ch: // already closed: d may be negative, and select picks at random
		return
	default:
	}
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("%s did not happen within %v", what, d)
	case <-t.Context().Done():
		t.Fatalf("%s: case ran out of time", what)
	}
}

// acquire takes key on d for the run's TTL, failing t when it cannot.
func (e *env) acquire(t *T, d driver.Driver, key string) driver.Lease {
	l, err := d.Acquire(t.Context(), e.request(key, e.ttl))
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	return l
}

// request makes a driver-level request for key.
func (e *env) request(key string, ttl time.Duration) driver.Request {
	return driver.Request{Key: key, ID: rand.Text(), TTL: ttl}
}

// waitFor polls cond every few milliseconds until it holds, failing the case
// after d. Polling is how the suite observes a backend it cannot subscribe
// to; it never stands in for synchronisation between the suite's own
// goroutines.
func waitFor(t *T, d time.Duration, what string, cond func() bool) {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within %v", what, d)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("%s: case ran out of time", what)
		case <-time.After(2 * time.Millisecond):
		}
	}
}
