package dlock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"syscall"
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

// Capabilities are the memory driver's Notifier, and the Transferer
// gated.
func (d *gatedTransfers) Capabilities() driver.Capabilities {
	return driver.Capabilities{Notifier: d.Driver.Capabilities().Notifier, Transferer: d}
}

func (d *gatedTransfers) Transfer(ctx context.Context, from driver.Lease, to driver.Request) (driver.Lease, error) {
	d.count.Add(1)
	if d.gate != nil {
		d.entered <- struct{}{}
		<-d.gate
	}
	return d.Driver.Capabilities().Transferer.Transfer(ctx, from, to)
}

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

// lossyTransfers is a transferring driver whose Transfer fails with a
// broken connection, the outcome unknown to the core: either the request
// was lost (the transfer did not happen) or its reply was (it did). As the
// driver.Transferer contract asks, a later Acquire with the transfer's
// request recovers a transfer that happened.
type lossyTransfers struct {
	driver.Driver
	replyLost bool // the transfer happens, and only its reply is lost
	mu        sync.Mutex
	happened  map[string]driver.Lease // by to.ID
	failed    atomic.Int64
}

// Capabilities are the memory driver's Notifier, and the lossy Transferer.
func (d *lossyTransfers) Capabilities() driver.Capabilities {
	return driver.Capabilities{Notifier: d.Driver.Capabilities().Notifier, Transferer: d}
}

func (d *lossyTransfers) Transfer(ctx context.Context, from driver.Lease, to driver.Request) (driver.Lease, error) {
	d.failed.Add(1)
	if d.replyLost {
		dl, err := d.Driver.Capabilities().Transferer.Transfer(ctx, from, to)
		if err != nil {
			return nil, err
		}
		d.mu.Lock()
		d.happened[to.ID] = dl
		d.mu.Unlock()
	}
	return nil, syscall.ECONNRESET
}

func (d *lossyTransfers) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	d.mu.Lock()
	dl, ok := d.happened[req.ID]
	delete(d.happened, req.ID)
	d.mu.Unlock()
	if ok {
		return dl, nil
	}
	return d.Driver.Acquire(ctx, req)
}

// A transfer whose outcome is unknown is not taken as done: the old hold is
// released when the transfer did not happen (else the lock would stay held
// until its TTL), and the waiter gets the lock either way, long before the
// TTL.
func TestHandoffOfUnknownOutcome(t *testing.T) {
	for name, replyLost := range map[string]bool{"RequestLost": false, "ReplyLost": true} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			b := memory.NewBackend()
			d := &lossyTransfers{Driver: memory.New(b, memory.WithoutBlocking()), replyLost: replyLost, happened: map[string]driver.Lease{}}
			const ttl = time.Minute // the waiter must not need to wait for it
			c, err := dlock.New(d, dlock.WithTTL(ttl))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(ctx)
			m, _ := c.Mutex("unknown-transfer")
			held, err := m.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan dlock.Lease, 1)
			waitCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			go func() {
				l, err := m.Lock(waitCtx)
				if err != nil {
					t.Errorf("the waiter's Lock: %v", err)
				}
				got <- l
			}()
			waitUntil(t, "the waiter's offer", func() bool { return dlock.Offered(c, "unknown-transfer") })
			if err := held.Unlock(ctx); err != nil {
				t.Errorf("Unlock: %v", err)
			}
			next := <-got
			if next == nil {
				return
			}
			if d.failed.Load() != 1 {
				t.Errorf("%d transfers, want 1", d.failed.Load())
			}
			if next.Token() <= held.Token() {
				t.Errorf("token %d after %d, want greater", next.Token(), held.Token())
			}
			if err := next.Unlock(ctx); err != nil {
				t.Errorf("Unlock of the waiter's lease: %v", err)
			}
			// Nothing is left behind: another client takes the lock at once.
			other, _ := dlock.New(memory.New(b))
			defer other.Close(ctx)
			om, _ := other.Mutex("unknown-transfer")
			l, err := om.TryLock(ctx)
			if err != nil {
				t.Fatalf("TryLock by another client afterwards: %v", err)
			}
			_ = l.Unlock(ctx)
		})
	}
}
