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

// gatedTransfers wraps the memory driver (without its server-side queue, so
// the core waits and hands over itself) and counts its transfers; when gate
// is set, each Transfer waits for it to close, after saying so on entered.
type gatedTransfers struct {
	driver.Driver
	count   atomic.Int64
	gate    chan struct{}
	entered chan struct{}
}

type transferringNotifier interface {
	driver.Driver
	driver.Notifier
	driver.Transferer
}

func (d *gatedTransfers) Subscribe(ctx context.Context, key string) (driver.Subscription, error) {
	return d.Driver.(driver.Notifier).Subscribe(ctx, key)
}

func (d *gatedTransfers) Transfer(ctx context.Context, from driver.Lease, to driver.Request) (driver.Lease, error) {
	d.count.Add(1)
	if d.gate != nil {
		d.entered <- struct{}{}
		<-d.gate
	}
	return d.Driver.(driver.Transferer).Transfer(ctx, from, to)
}

var _ transferringNotifier = (*gatedTransfers)(nil)

func newGated(b *memory.Backend) *gatedTransfers {
	return &gatedTransfers{Driver: memory.New(b, memory.WithoutBlocking())}
}

// waitUntil polls an internal condition the test cannot be told about,
// with a generous bound.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestUnlockHandsOverToWaiterOfSameClient(t *testing.T) {
	ctx := t.Context()
	d := newGated(memory.NewBackend())
	c, err := dlock.New(d)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	m, _ := c.Mutex("handoff")
	held, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan dlock.Lease, 1)
	go func() {
		l, err := m.Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	waitUntil(t, "the waiter's offer", func() bool { return dlock.Offered(c, "handoff") })
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	next := <-got
	if d.count.Load() != 1 {
		t.Errorf("%d transfers, want 1", d.count.Load())
	}
	if next.Token() <= held.Token() {
		t.Errorf("token %d after %d, want greater", next.Token(), held.Token())
	}
	if err := next.Unlock(ctx); err != nil {
		t.Errorf("Unlock of the handed-over lease: %v", err)
	}
}

func TestWaiterGivingUpDuringHandoffLeavesLockFree(t *testing.T) {
	ctx := t.Context()
	b := memory.NewBackend()
	d := newGated(b)
	d.gate, d.entered = make(chan struct{}), make(chan struct{}, 1)
	c, err := dlock.New(d)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	m, _ := c.Mutex("abandoned")
	held, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithCancel(ctx)
	waited := make(chan error, 1)
	go func() {
		_, err := m.Lock(waitCtx)
		waited <- err
	}()
	waitUntil(t, "the waiter's offer", func() bool { return dlock.Offered(c, "abandoned") })
	unlocked := make(chan error, 1)
	go func() { unlocked <- held.Unlock(ctx) }()
	<-d.entered // the transfer is in flight
	cancel()
	if err := <-waited; !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock after its context ended mid-handoff: got %v, want context.Canceled", err)
	}
	close(d.gate)
	if err := <-unlocked; err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	// The transfer happened, nobody took the lock: the Unlock gave it back.
	other, err := dlock.New(memory.New(b))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	om, _ := other.Mutex("abandoned")
	l, err := om.TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock by another client after the abandoned handoff: %v", err)
	}
	_ = l.Unlock(ctx)
}

func TestHandoffsYieldToOtherClients(t *testing.T) {
	ctx := t.Context()
	b := memory.NewBackend()
	d := newGated(b)
	c, err := dlock.New(d)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	m, _ := c.Mutex("yield")
	other, err := dlock.New(memory.New(b, memory.WithoutBlocking()))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	om, _ := other.Mutex("yield")

	// Many goroutines of one client keep handing the lock among themselves
	// while one waiter of another client waits: it must get its turn.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for runCtx.Err() == nil {
				l, err := m.Lock(runCtx)
				if err != nil {
					return
				}
				_ = l.Unlock(ctx)
			}
		}()
	}
	waitUntil(t, "handoffs inside the client", func() bool { return d.count.Load() > 0 })
	lockCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	l, err := om.Lock(lockCtx)
	if err != nil {
		t.Fatalf("the other client's waiter never got the lock: %v", err)
	}
	_ = l.Unlock(ctx)
	stop()
	for range 4 {
		<-done
	}
}
