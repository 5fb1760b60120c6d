package dlock_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/drivers/memory"
	"github.com/dlock-go/dlock/internal/testkit"
)

// Handoffs to a lone waiter: a goroutine that asks for a lock another
// goroutine of its Client holds, with nobody else of the Client waiting,
// starts a new wait queue of its own.

// countedRequests wraps the memory driver with token blocks (and without its
// server-side queue, so the core waits and hands over itself), counting the
// acquisitions, transfers and subscriptions that reach it.
type countedRequests struct {
	driver.Driver
	acquires, transfers, subscribes atomic.Int64
}

// Capabilities are the memory driver's, counted: Notifier, Transferer and
// TokenBlock.
func (d *countedRequests) Capabilities() driver.Capabilities {
	return driver.Capabilities{Notifier: d, Transferer: d, TokenBlock: d.Driver.Capabilities().TokenBlock}
}

func (d *countedRequests) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	d.acquires.Add(1)
	return d.Driver.Acquire(ctx, req)
}

func (d *countedRequests) Transfer(ctx context.Context, from driver.Lease, to driver.Request) (driver.Lease, error) {
	d.transfers.Add(1)
	return d.Driver.Capabilities().Transferer.Transfer(ctx, from, to)
}

func (d *countedRequests) Subscribe(ctx context.Context, key string) (driver.Subscription, error) {
	d.subscribes.Add(1)
	return d.Driver.Capabilities().Notifier.Subscribe(ctx, key)
}

// requests is every request counted so far.
func (d *countedRequests) requests() int64 {
	return d.acquires.Load() + d.transfers.Load() + d.subscribes.Load()
}

// Two goroutines of one Client pass a lock back and forth, each asking for
// it again while the other holds it: each handoff goes to a lone waiter.
// Within the grant's token block, and up to maxTransfers (8) consecutive
// handoffs, none asks the backend anything, not even the waiter before it
// offers itself (it knows its own Client holds the lock); only the first
// wait subscribes, once.
func TestLoneWaiterHandoffSkipsBackend(t *testing.T) {
	ctx := t.Context()
	d := &countedRequests{Driver: memory.New(memory.NewBackend(), memory.WithoutBlocking(), memory.WithTokenBlocks(64))}
	c := newClientOver(t, d)
	m, _ := c.Mutex("lone")
	held := testkit.Lock(t, ctx, m)
	before := d.requests()
	const rounds = 8
	for i := range rounds {
		next := handOver(t, c, m, held, nil)
		if next.Token() != held.Token()+1 {
			t.Fatalf("round %d: token %d after %d, want the next of the block", i, next.Token(), held.Token())
		}
		held = next
	}
	if n := d.requests() - before; n > 1 {
		t.Errorf("%d backend requests in %d handoffs to a lone waiter, want at most its first subscription (acquisitions %d, transfers %d, subscriptions %d)",
			n, rounds, d.acquires.Load()-1, d.transfers.Load(), d.subscribes.Load())
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// Handoffs between lone waiters count towards yielding to other Clients as
// those of one queue do: every (maxTransfers+1)th Unlock releases the lock
// instead of handing it over, so that the waiter acquires it from the
// backend, where another Client's waiter could have taken it first.
func TestLoneWaiterHandoffsYield(t *testing.T) {
	ctx := t.Context()
	d := &countedRequests{Driver: memory.New(memory.NewBackend(), memory.WithoutBlocking(), memory.WithTokenBlocks(64))}
	c := newClientOver(t, d)
	m, _ := c.Mutex("lone-yield")
	held := testkit.Lock(t, ctx, m)
	const maxTransfers, cycles = 8, 3
	var yielded []int
	for i := 1; i <= cycles*(maxTransfers+1); i++ {
		acquires := d.acquires.Load()
		held = handOver(t, c, m, held, nil)
		if d.acquires.Load() > acquires {
			yielded = append(yielded, i)
		}
	}
	if len(yielded) != cycles {
		t.Errorf("handoffs %v went through the backend, want every %dth of %d", yielded, maxTransfers+1, cycles*(maxTransfers+1))
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
