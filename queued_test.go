package dlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/drivers/memory"
	"github.com/dlock-go/dlock/internal/testkit"
)

// queuingDriver is a driver whose backend queues waiting requests
// (driver.Request.Wait) and wakes them by its Notifier: its refusals of
// such requests say so (driver.LockedError.Queued), with a RetryAfter far
// beyond the test. It counts its Acquire calls.
type queuingDriver struct {
	driver.Driver
	attempts atomic.Int64
}

func (d *queuingDriver) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	d.attempts.Add(1)
	l, err := d.Driver.Acquire(ctx, req)
	if req.Wait && errors.Is(err, driver.ErrLocked) {
		return nil, &driver.LockedError{RetryAfter: time.Hour, Queued: true}
	}
	return l, err
}

// A head whose driver queued it waits for the driver's wake-up instead of
// polling with the core's backoff (which starts at 2 ms), and the release's
// wake-up still brings it the lock at once.
func TestQueuedHeadWaitsForWakeUp(t *testing.T) {
	b := memory.NewBackend()
	key := testkit.Key(t)
	holder := testkit.Mutex(t, newClient(t, b), key)
	held := mustLock(t, holder)

	d := &queuingDriver{Driver: memory.New(b, memory.WithoutBlocking())}
	m := testkit.Mutex(t, newClientOver(t, d), key)
	got := lockAsync(t.Context(), m.Lock)
	// The first try, then the one the driver queues (after the
	// subscription, whose confirmation may wake the head once more).
	waitUntil(t, "the queued try", func() bool { return d.attempts.Load() >= 2 })
	// Long enough for the backoff of a head that polls to try several
	// times (2, 4, 8... ms); a loaded machine only makes it try less.
	time.Sleep(300 * time.Millisecond)
	if n := d.attempts.Load(); n > 3 {
		t.Errorf("%d attempts while queued and not woken, want at most 3: the head polled", n)
	}
	if err := held.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("Lock after the release: %v", r.err)
		}
		_ = r.l.Unlock(t.Context())
	case <-time.After(10 * time.Second): // its RetryAfter is an hour: only the wake-up gets it there
		t.Fatal("the queued head did not get the lock within 10 s of the release")
	}
}
