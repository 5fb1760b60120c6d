package dlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/drivers/memory"
)

// stalledReleases is fault middleware whose leases' Release is held up, as
// by a paused backend: until stallUntil passes (when set), or until gate
// closes (when set), or its context ends. It notes whether its Close ran
// while a Release was still under way.
type stalledReleases struct {
	driver.Driver
	stallFor time.Duration // after the lease's grant
	gate     chan struct{}
	entered  chan struct{}

	releasing       atomic.Int64
	closedMidAction atomic.Bool
}

// Capabilities declares none: the core polls, and renews lease by lease.
func (d *stalledReleases) Capabilities() driver.Capabilities { return driver.Capabilities{} }

func (d *stalledReleases) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	dl, err := d.Driver.Acquire(ctx, req)
	if err != nil {
		return nil, err
	}
	return &stalledLease{Lease: dl, d: d, granted: time.Now()}, nil
}

func (d *stalledReleases) Close() error {
	if d.releasing.Load() > 0 {
		d.closedMidAction.Store(true)
	}
	return d.Driver.Close()
}

type stalledLease struct {
	driver.Lease
	d       *stalledReleases
	granted time.Time
}

func (l *stalledLease) Release(ctx context.Context) error {
	l.d.releasing.Add(1)
	defer l.d.releasing.Add(-1)
	if l.d.entered != nil {
		l.d.entered <- struct{}{}
	}
	var stall <-chan time.Time
	if l.d.stallFor > 0 {
		timer := time.NewTimer(time.Until(l.granted.Add(l.d.stallFor)))
		defer timer.Stop()
		stall = timer.C
	}
	select {
	case <-stall:
	case <-l.d.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return l.Lease.Release(ctx)
}

// An Unlock that starts inside the lease's validity but whose release is
// held up until the backend has expired the lock returns nil (the lock is
// free, as asked; the lease was not lost before Unlock), and Err agrees:
// ErrNotHeld, the lease having ended by Unlock.
func TestUnlockStalledPastDeadlineAgreesWithErr(t *testing.T) {
	const ttl = 300 * time.Millisecond
	b := memory.NewBackend()
	// The release reaches the backend two TTLs after the grant: the lock
	// expired there a TTL earlier.
	d := &stalledReleases{Driver: memory.New(b, memory.WithoutBlocking()), stallFor: 2 * ttl}
	l := hold(t, d, "stalled-unlock", dlock.WithTTL(ttl), dlock.WithoutRenewal()).held
	if !time.Now().Before(l.Deadline()) {
		t.Skip("the machine took a whole TTL to return from Lock")
	}
	err := l.Unlock(t.Context())
	if time.Now().Before(l.Deadline()) {
		t.Fatal("the release was not held up past the deadline")
	}
	if err != nil {
		t.Errorf("Unlock: got %v, want nil", err)
	}
	if err := l.Err(); err != dlock.ErrNotHeld {
		t.Errorf("Err after Unlock: got %v, want ErrNotHeld", err)
	}
	if err := l.Unlock(t.Context()); err != dlock.ErrNotHeld {
		t.Errorf("second Unlock: got %v, want ErrNotHeld", err)
	}
}

// A backend that lost the lock inside the lease's validity, without telling
// (here: restarted, with no loss reports), makes Unlock report the loss, and
// Err says the same.
func TestUnlockFindingLockLostAgreesWithErr(t *testing.T) {
	b := memory.NewBackend()
	l := hold(t, memory.New(b, memory.WithoutBlocking(), memory.WithoutLossReports()), "lost-unnoticed", dlock.WithTTL(30*time.Second)).held
	b.Restart()
	err := l.Unlock(t.Context())
	if !errors.Is(err, dlock.ErrLockLost) {
		t.Errorf("Unlock: got %v, want ErrLockLost", err)
	}
	if got := l.Err(); got != err {
		t.Errorf("Err after Unlock: got %v, want the same as Unlock (%v)", got, err)
	}
	select {
	case <-l.Done():
	default:
		t.Error("Done not closed after Unlock")
	}
}

// unlockStalled starts the Unlock, with ctx, of a lease on key held over a
// stalledReleases, and returns once its release is under way and held up
// by the driver's gate. Unlock's error comes on unlocked.
func unlockStalled(t *testing.T, key string, ctx context.Context) (d *stalledReleases, c *dlock.Client, unlocked <-chan error) {
	t.Helper()
	d = &stalledReleases{Driver: memory.New(memory.NewBackend()), gate: make(chan struct{}), entered: make(chan struct{}, 1)}
	h := hold(t, d, key)
	done := make(chan error, 1)
	go func() { done <- h.held.Unlock(ctx) }()
	<-d.entered
	return d, h.c, done
}

// Close waits for an Unlock's release before it closes the driver, and a
// Close whose context ends first abandons it: Unlock then says ErrClosed.
func TestCloseWaitsForUnlock(t *testing.T) {
	t.Run("Waits", func(t *testing.T) {
		d, c, unlocked := unlockStalled(t, "close-waits", t.Context())
		closed := make(chan error, 1)
		go func() { closed <- c.Close(t.Context()) }()
		waitUntil(t, "Close to begin", func() bool {
			_, err := c.Mutex("probe")
			return errors.Is(err, dlock.ErrClosed)
		})
		// Close must not get past the release: give it every chance to.
		select {
		case err := <-closed:
			t.Fatalf("Close returned (%v) while an Unlock was releasing", err)
		case <-time.After(100 * time.Millisecond):
		}
		close(d.gate)
		if err := <-unlocked; err != nil {
			t.Errorf("Unlock: %v", err)
		}
		if err := <-closed; err != nil {
			t.Errorf("Close: %v", err)
		}
		if d.closedMidAction.Load() {
			t.Error("the driver was closed while a release was under way")
		}
	})
	t.Run("Abandons", func(t *testing.T) {
		d, c, unlocked := unlockStalled(t, "close-abandons", context.Background())
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		select {
		case err := <-unlocked:
			if err != dlock.ErrClosed {
				t.Errorf("Unlock cut short by Close: got %v, want ErrClosed", err)
			}
		case <-time.After(10 * time.Second):
			close(d.gate) // let the release go, so the test ends
			<-unlocked
			t.Error("Close returned, but the Unlock it gave up waiting for still runs")
		}
		if d.closedMidAction.Load() {
			t.Error("the driver was closed while a release was under way")
		}
	})
}
