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
	"github.com/dlock-go/dlock/internal/testkit"
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

// stallingSubscriber is the memory driver without its server-side queue,
// transferring; its first Subscribe is refused (the head then polls), and
// later ones hang until their context ends, after saying so on entered.
type stallingSubscriber struct {
	driver.Driver
	subs    atomic.Int64
	entered chan struct{}
}

// Capabilities: the Notifier below, and the memory driver's Transferer.
func (d *stallingSubscriber) Capabilities() driver.Capabilities {
	return driver.Capabilities{Notifier: d, Transferer: d.Driver.Capabilities().Transferer}
}

func (d *stallingSubscriber) Subscribe(ctx context.Context, key string) (driver.Subscription, error) {
	if d.subs.Add(1) == 1 {
		return nil, errors.New("NOPERM no permission for the channel")
	}
	d.entered <- struct{}{}
	<-ctx.Done()
	return nil, ctx.Err()
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

func TestHandoffsYieldToOtherClients(t *testing.T) {
	ctx := t.Context()
	b := memory.NewBackend()
	d := newGated(b)
	c := newClientOver(t, d)
	m, _ := c.Mutex("yield")
	other := newClientOver(t, memory.New(b, memory.WithoutBlocking()))
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
			// The waiter must not need to wait for the TTL.
			h := hold(t, d, "unknown-transfer", dlock.WithTTL(time.Minute))
			next := handOver(t, h.c, h.m, h.held, nil)
			if d.failed.Load() != 1 {
				t.Errorf("%d transfers, want 1", d.failed.Load())
			}
			if next.Token() <= h.held.Token() {
				t.Errorf("token %d after %d, want greater", next.Token(), h.held.Token())
			}
			if err := next.Unlock(ctx); err != nil {
				t.Errorf("Unlock of the waiter's lease: %v", err)
			}
			requireFree(t, b, "unknown-transfer") // nothing is left behind
		})
	}
}

// countedBlocks wraps the memory driver with token blocks (and without its
// server-side queue, so the core waits and hands over itself), counting the
// requests that reach it.
type countedBlocks struct {
	driver.Driver
	tries, transfers atomic.Int64
}

// Capabilities are the memory driver's Notifier and TokenBlock, and its
// Transferer counted.
func (d *countedBlocks) Capabilities() driver.Capabilities {
	in := d.Driver.Capabilities()
	return driver.Capabilities{Notifier: in.Notifier, Transferer: d, TokenBlock: in.TokenBlock}
}

func (d *countedBlocks) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	d.tries.Add(1)
	return d.Driver.Acquire(ctx, req)
}

func (d *countedBlocks) Transfer(ctx context.Context, from driver.Lease, to driver.Request) (driver.Lease, error) {
	d.transfers.Add(1)
	return d.Driver.Capabilities().Transferer.Transfer(ctx, from, to)
}

func newCountedBlocks(t *testing.T, b *memory.Backend, block uint64) (*countedBlocks, *dlock.Client) {
	t.Helper()
	d := &countedBlocks{Driver: memory.New(b, memory.WithoutBlocking(), memory.WithTokenBlocks(block))}
	c, err := dlock.New(d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return d, c
}

// handOver unlocks held while another goroutine of the same Client waits on
// m (having made its offer, when offered runs), and returns the waiter's
// lease. The waiter gives up after 20 s: a handoff never waits for a TTL.
func handOver(t *testing.T, c *dlock.Client, m dlock.Mutex, held dlock.Lease, offered func()) dlock.Lease {
	t.Helper()
	waitCtx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	got := lockAsync(waitCtx, m.Lock)
	waitUntil(t, "the waiter's offer", func() bool { return dlock.Offered(c, held.Key()) })
	if offered != nil {
		offered()
	}
	if err := held.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("the waiter's Lock: %v", r.err)
	}
	return r.l
}

func TestHandoffWithinTokenBlockSkipsBackend(t *testing.T) {
	ctx := t.Context()
	b := memory.NewBackend()
	d, c := newCountedBlocks(t, b, 8)
	m, _ := c.Mutex("local")
	held := testkit.Lock(t, ctx, m)
	first, deadline := held.Token(), held.Deadline()
	var tries int64
	next := handOver(t, c, m, held, func() { tries = d.tries.Load() })
	if n := d.transfers.Load(); n != 0 {
		t.Errorf("%d transfers, want none: the block has tokens left", n)
	}
	if n := d.tries.Load() - tries; n != 0 {
		t.Errorf("%d acquisitions during the handoff, want none", n)
	}
	if next.Token() != first+1 {
		t.Errorf("token %d after %d, want the next of the block", next.Token(), first)
	}
	if !next.Deadline().Equal(deadline) {
		t.Errorf("deadline %v, want the hold's %v", next.Deadline(), deadline)
	}
	if err := held.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("second Unlock of the first lease: %v, want ErrNotHeld", err)
	}
	if err := next.Extend(ctx); err != nil {
		t.Errorf("Extend of the handed-over lease: %v", err)
	}
	if err := next.Unlock(ctx); err != nil {
		t.Fatalf("Unlock of the handed-over lease: %v", err)
	}

	// Another client's grant comes after the whole block.
	_, other := newCountedBlocks(t, b, 1)
	om, _ := other.Mutex("local")
	l, err := om.TryLock(ctx)
	if err != nil {
		t.Fatalf("the lock is not free after the handed-over lease's Unlock: %v", err)
	}
	defer l.Unlock(ctx)
	if l.Token() < first+8 {
		t.Errorf("another client's token %d, want at least %d (past the block of %d)", l.Token(), first+8, first)
	}
}

func TestHandoffPastTokenBlockGoesToBackend(t *testing.T) {
	ctx := t.Context()
	d, c := newCountedBlocks(t, memory.NewBackend(), 2)
	m, _ := c.Mutex("block")
	held := testkit.Lock(t, ctx, m)
	second := handOver(t, c, m, held, nil) // the block's second token
	third := handOver(t, c, m, second, nil)
	defer third.Unlock(ctx)
	if n := d.transfers.Load(); n != 1 {
		t.Errorf("%d transfers, want 1: the block of 2 was used up", n)
	}
	if !(held.Token() < second.Token() && second.Token() < third.Token()) {
		t.Errorf("tokens %d, %d, %d: want increasing", held.Token(), second.Token(), third.Token())
	}
}

func TestHandedOverLeaseLearnsOfLoss(t *testing.T) {
	ctx := t.Context()
	b := memory.NewBackend()
	_, c := newCountedBlocks(t, b, 8)
	m, _ := c.Mutex("lost", dlock.WithTTL(time.Hour))
	held := testkit.Lock(t, ctx, m)
	next := handOver(t, c, m, held, nil)
	b.Tamper("lost", true)
	select {
	case <-next.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the handed-over lease was not told of the loss")
	}
	if err := next.Err(); !errors.Is(err, dlock.ErrLockLost) {
		t.Errorf("Err = %v, want ErrLockLost", err)
	}
}

func TestLostLeaseIsNotHandedOver(t *testing.T) {
	ctx := t.Context()
	b := memory.NewBackend()
	d, c := newCountedBlocks(t, b, 8)
	// The waiter sleeps until woken (a notification, a handoff), so the
	// test knows when its offer is out.
	m, _ := c.Mutex("lost-first", dlock.WithTTL(time.Hour), dlock.WithPolling(time.Hour, time.Hour))
	held := testkit.Lock(t, ctx, m)
	waitCtx, cancel := context.WithCancel(ctx)
	waited := lockAndUnlock(waitCtx, m.Lock)
	// A stranger takes the lock behind the holder's back; the holder
	// learns of it.
	b.Tamper("lost-first", true)
	<-held.Done()
	waitUntil(t, "the waiter's offer", func() bool { return dlock.Offered(c, "lost-first") })
	if err := held.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Unlock of the lost lease: %v, want ErrLockLost", err)
	}
	// Only the backend can tell whether a lost lease still holds anything:
	// the handoff must go through it (and it says no), not hand the lost
	// hold over.
	if n := d.transfers.Load(); n != 1 {
		t.Errorf("%d transfers, want 1: a lost lease's hold was handed over without the backend", n)
	}
	cancel()
	if err := <-waited; !errors.Is(err, context.Canceled) {
		t.Errorf("the waiter's Lock: %v, want context.Canceled (the stranger holds the lock)", err)
	}
}
