package dlock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/drivers/memory"
	"github.com/dlock-go/dlock/internal/testkit"
)

// plainDriver hides a driver's capabilities: it declares none.
type plainDriver struct{ driver.Driver }

func (plainDriver) Capabilities() driver.Capabilities { return driver.Capabilities{} }

// newClientOver makes a Client over d, closed when the test ends.
func newClientOver(t *testing.T, d driver.Driver, opts ...dlock.Option) *dlock.Client {
	t.Helper()
	c, err := dlock.New(d, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// holding is a Client, closed when the test ends, whose handoffs are
// observed, and a lease it holds.
type holding struct {
	c     *dlock.Client
	m     dlock.Mutex
	held  dlock.Lease
	steps func() []dlock.HandoffStep
}

// hold makes a holding over d, its lease on key taken by a Mutex with opts.
func hold(t *testing.T, d driver.Driver, key string, opts ...dlock.Option) holding {
	t.Helper()
	c := newClientOver(t, d)
	steps := dlock.ObserveHandoffs(c)
	m := testkit.Mutex(t, c, key, opts...)
	return holding{c, m, mustLock(t, m), steps}
}

// waiter starts a Lock of h's mutex with ctx, and waits for its offer.
func (h holding) waiter(t *testing.T, ctx context.Context) <-chan lockResult {
	t.Helper()
	got := lockAsync(ctx, h.m.Lock)
	waitUntil(t, "the waiter's offer", func() bool { return dlock.Offered(h.c, h.m.Key()) })
	return got
}

// newClient makes a Client over the memory driver of b, closed when the
// test ends.
func newClient(t *testing.T, b *memory.Backend, opts ...dlock.Option) *dlock.Client {
	t.Helper()
	return newClientOver(t, memory.New(b), opts...)
}

// requireFree fails the test unless another client of b takes the lock on
// key at once: nothing was left holding it.
func requireFree(t *testing.T, b *memory.Backend, key string) {
	t.Helper()
	requireLock(t, b, key, true)
}

// requireHeld fails the test unless the lock on key is held: another client
// of b cannot take it.
func requireHeld(t *testing.T, b *memory.Backend, key string) {
	t.Helper()
	requireLock(t, b, key, false)
}

func requireLock(t *testing.T, b *memory.Backend, key string, wantFree bool) {
	t.Helper()
	other := newClientOver(t, memory.New(b))
	defer other.Close(context.Background())
	om, _ := other.Mutex(key)
	l, err := om.TryLock(t.Context())
	switch {
	case err == nil:
		_ = l.Unlock(t.Context())
		if !wantFree {
			t.Fatalf("another client took the lock on %q that a lease holds", key)
		}
	case wantFree:
		t.Fatalf("TryLock of %q by another client: %v; want the lock free", key, err)
	case !errors.Is(err, dlock.ErrLocked):
		t.Fatalf("TryLock of %q by another client: %v, want ErrLocked", key, err)
	}
}

// mustLock takes m's lock, or ends the test.
func mustLock(t *testing.T, m dlock.Mutex) dlock.Lease {
	t.Helper()
	return testkit.Lock(t, t.Context(), m)
}

// lockAsync runs lock(ctx) in a goroutine; what it returned comes on the
// channel.
func lockAsync(ctx context.Context, lock func(context.Context) (dlock.Lease, error)) <-chan lockResult {
	got := make(chan lockResult, 1)
	go func() {
		l, err := lock(ctx)
		got <- lockResult{l, err}
	}()
	return got
}

// lockResult is what a Lock returned.
type lockResult struct {
	l   dlock.Lease
	err error
}

// lockAndUnlock runs lock(ctx) in a goroutine, then, when it succeeds,
// Unlock; the first error, or nil, comes on the channel.
func lockAndUnlock(ctx context.Context, lock func(context.Context) (dlock.Lease, error)) <-chan error {
	got := make(chan error, 1)
	go func() {
		l, err := lock(ctx)
		if err == nil {
			err = l.Unlock(ctx)
		}
		got <- err
	}()
	return got
}
