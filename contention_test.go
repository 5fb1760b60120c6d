package dlock_test

import (
	"context"
	"sync"
	"testing"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/drivers/memory"
	"github.com/dlock-go/dlock/internal/testkit"
)

// waitFlagDriver is a queuingDriver that records, for each Acquire, whether
// it was a try that may queue (driver.Request.Wait).
type waitFlagDriver struct {
	queuingDriver
	mu    sync.Mutex
	waits []bool
}

func (d *waitFlagDriver) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	d.mu.Lock()
	d.waits = append(d.waits, req.Wait)
	d.mu.Unlock()
	return d.queuingDriver.Acquire(ctx, req)
}

// firstWait reports whether the first Acquire from index i on was a try
// that may queue, once there is one.
func (d *waitFlagDriver) firstWait(t *testing.T, i int) bool {
	t.Helper()
	waitUntil(t, "an attempt", func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return len(d.waits) > i
	})
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.waits[i]
}

func (d *waitFlagDriver) calls() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.waits)
}

// A Lock that had to wait makes the next Lock of its key subscribe before
// its first try, so that this try may already queue in the backend: one
// refused request for a contended Lock instead of two. A Lock granted at
// once makes the next one try before subscribing again, so that an
// uncontended Lock costs no subscription.
func TestContendedLockQueuesOnItsFirstTry(t *testing.T) {
	b := memory.NewBackend()
	key := testkit.Key(t)
	holder := testkit.Mutex(t, newClient(t, b), key)
	d := &waitFlagDriver{queuingDriver: queuingDriver{Driver: memory.New(b, memory.WithoutBlocking())}}
	m := testkit.Mutex(t, newClientOver(t, d), key)

	contendedLock := func(wantFirstWait bool) {
		t.Helper()
		held := mustLock(t, holder)
		first := d.calls()
		got := lockAsync(t.Context(), m.Lock)
		if w := d.firstWait(t, first); w != wantFirstWait {
			t.Errorf("first try of a contended Lock: Wait %v, want %v", w, wantFirstWait)
		}
		if err := held.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
		r := <-got
		if r.err != nil {
			t.Fatal(r.err)
		}
		if err := r.l.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	freeLock := func(wantWait bool) {
		t.Helper()
		first := d.calls()
		l := mustLock(t, m)
		if w := d.firstWait(t, first); w != wantWait {
			t.Errorf("the try of an uncontended Lock: Wait %v, want %v", w, wantWait)
		}
		if err := l.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	contendedLock(false) // nothing known yet: try, then subscribe
	contendedLock(true)  // the last one waited: subscribe, then a try that queues
	freeLock(true)       // still expected to wait: granted by the queued try
	freeLock(false)      // the last one did not wait: a plain try
}
