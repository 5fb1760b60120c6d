package dlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/drivers/memory"
	"github.com/dlock-go/dlock/internal/testkit"
)

// `defer lease.Unlock(ctx)` with a request context that already ended must
// still give the lock back, not leave it for a whole TTL.
func TestUnlockWithEndedContextStillReleases(t *testing.T) {
	b := memory.NewBackend()
	c := newClient(t, b, dlock.WithTTL(time.Hour))
	m := testkit.Mutex(t, c, "k")
	l := mustLock(t, m)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := l.Unlock(ctx); err != context.Canceled {
		t.Fatalf("Unlock with a cancelled context: got %v, want context.Canceled", err)
	}
	waitCtx, stop := context.WithTimeout(t.Context(), 10*time.Second)
	defer stop()
	other := newClient(t, b)
	om, _ := other.Mutex("k")
	l2, err := om.Lock(waitCtx)
	if err != nil {
		t.Fatalf("the lock was not given back: %v", err)
	}
	_ = l2.Unlock(t.Context())
}

func TestErrorsWrapOnceWithOperationAndKey(t *testing.T) {
	b := memory.NewBackend()
	c1, c2 := newClient(t, b), newClient(t, b)
	m1, _ := c1.Mutex("orders/42")
	m2, _ := c2.Mutex("orders/42")
	l := mustLock(t, m1)
	defer l.Unlock(t.Context())
	_, err := m2.TryLock(t.Context())
	var de *dlock.Error
	if !errors.As(err, &de) || de.Op != "trylock" || de.Key != "orders/42" {
		t.Fatalf("got %#v, want an *Error for trylock on orders/42", err)
	}
	if !errors.Is(err, dlock.ErrLocked) {
		t.Errorf("%v does not satisfy errors.Is(ErrLocked)", err)
	}
}

func TestUnsupportedCapabilities(t *testing.T) {
	b := memory.NewBackend()
	c, err := dlock.New(plainDriver{memory.New(b)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(t.Context())
	if _, err := c.RWMutex("k"); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("RWMutex: got %v, want ErrUnsupported", err)
	}
	if _, err := c.Mutex("k", dlock.WithOwner("me")); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("WithOwner: got %v, want ErrUnsupported", err)
	}
}

func TestLeaseDeadlineAndRenewal(t *testing.T) {
	b := memory.NewBackend()
	c := newClient(t, b, dlock.WithTTL(time.Second))
	m, _ := c.Mutex("k")
	started := time.Now()
	l := mustLock(t, m)
	first := l.Deadline()
	if first.After(started.Add(time.Second)) {
		t.Errorf("deadline %v after start plus TTL", first.Sub(started))
	}
	// Renewal must move the deadline; wait for it without sleeping blind.
	for l.Deadline().Equal(first) {
		select {
		case <-l.Done():
			t.Fatalf("lease lost while renewing: %v", l.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := l.Err(); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("Err after Unlock: got %v, want ErrNotHeld", err)
	}
}

// A lease whose renewal fails is uncertain until it is confirmed again.
func TestUncertainWhileRenewalFails(t *testing.T) {
	b := memory.NewBackend()
	c := newClient(t, b, dlock.WithTTL(2*time.Second))
	m, _ := c.Mutex("k")
	l := mustLock(t, m)
	defer l.Unlock(t.Context())
	if err := l.Uncertain(); err != nil {
		t.Fatalf("fresh lease: Uncertain = %v, want nil", err)
	}
	b.Pause()
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	err := l.Extend(ctx) // hangs on the paused backend until ctx ends
	cancel()
	if err == nil {
		t.Fatal("Extend on a paused backend succeeded")
	}
	if l.Uncertain() == nil {
		t.Error("after a failed renewal: Uncertain = nil, want the failure")
	}
	b.Resume()
	if err := l.Extend(t.Context()); err != nil {
		t.Fatalf("Extend after resume: %v", err)
	}
	if err := l.Uncertain(); err != nil {
		t.Errorf("after a successful renewal: Uncertain = %v, want nil", err)
	}
}

func TestInspect(t *testing.T) {
	b := memory.NewBackend()
	c := newClient(t, b, dlock.WithTTL(time.Minute))
	m, _ := c.Mutex("k")
	if info, err := c.Inspect(t.Context(), "k"); err != nil || info.Held {
		t.Fatalf("free lock: got %+v, %v", info, err)
	}
	l := mustLock(t, m)
	info, err := c.Inspect(t.Context(), "k")
	if err != nil || !info.Held || info.Token != l.Token() || info.TTL <= 0 || info.TTL > time.Minute {
		t.Errorf("held lock: got %+v, %v; want held with token %d and a TTL", info, err, l.Token())
	}
	_ = l.Unlock(t.Context())
	plain, _ := dlock.New(plainDriver{memory.New(b)})
	defer plain.Close(t.Context())
	if _, err := plain.Inspect(t.Context(), "k"); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("driver without Inspector: got %v, want ErrUnsupported", err)
	}
}

// slowGrant is fault middleware: its grants come back late, after the lock
// was taken, as replies do from a backend that is restarting or a machine
// that is loaded.
type slowGrant struct {
	driver.Driver
	late time.Duration
}

func (d slowGrant) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	dl, err := d.Driver.Acquire(ctx, req)
	if err == nil {
		time.Sleep(d.late) // the reply's delay, not synchronisation
	}
	return dl, err
}

func (slowGrant) Capabilities() driver.Capabilities { return driver.Capabilities{} }

// A grant that came back with less than a renewal interval of its validity
// left is renewed before its deadline: the first renewal is counted from
// the acquisition's start, as the deadline is, not from its return. (Counted
// from its return, it would fall after the deadline, and the lease would be
// lost though nothing else could have taken the lock.)
func TestLateGrantRenewedBeforeDeadline(t *testing.T) {
	const ttl = 6 * time.Second // renewal interval 2 s
	b := memory.NewBackend()
	c := newClientOver(t, slowGrant{memory.New(b), ttl * 3 / 4}, dlock.WithTTL(ttl))
	m := testkit.Mutex(t, c, "k")
	l := mustLock(t, m)
	defer l.Unlock(t.Context())
	first := l.Deadline()
	if left := time.Until(first); left >= ttl/3 {
		t.Skipf("the grant came back with %v left, more than a renewal interval: nothing to check", left)
	}
	for l.Deadline().Equal(first) {
		select {
		case <-l.Done():
			t.Fatalf("lease lost before its first renewal: %v", l.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}
