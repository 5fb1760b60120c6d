package dlock_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
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

// redlockLike wraps the memory driver as the RedLock driver looks to the
// core: token blocks and notifications, no Transferer, no server-side queue
// the core could block in, and slow acquisitions (a round of requests to
// several masters). Its subscriptions forward the memory backend's
// notifications, and late ones the test injects (late: one per master).
type redlockLike struct {
	driver.Driver
	b        *memory.Backend
	acquires atomic.Int64

	mu   sync.Mutex
	subs map[*lateSub]bool
}

func newRedlockLike(opts ...memory.Option) *redlockLike {
	opts = append([]memory.Option{memory.WithoutBlocking(), memory.WithTokenBlocks(64)}, opts...)
	b := memory.NewBackend()
	return &redlockLike{Driver: memory.New(b, opts...), b: b, subs: map[*lateSub]bool{}}
}

// Capabilities: Notifier and TokenBlock, as RedLock declares them among
// those the core's waiting uses.
func (d *redlockLike) Capabilities() driver.Capabilities {
	return driver.Capabilities{Notifier: d, TokenBlock: d.Driver.Capabilities().TokenBlock}
}

func (d *redlockLike) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	d.acquires.Add(1)
	time.Sleep(time.Millisecond) // the masters' latency, not synchronisation
	return d.Driver.Acquire(ctx, req)
}

func (d *redlockLike) Subscribe(ctx context.Context, key string) (driver.Subscription, error) {
	in, err := d.Driver.Capabilities().Notifier.Subscribe(ctx, key)
	if err != nil {
		return nil, err
	}
	s := &lateSub{d: d, in: in, c: make(chan struct{}, 1), stop: make(chan struct{})}
	d.mu.Lock()
	d.subs[s] = true
	d.mu.Unlock()
	s.wg.Go(s.forward)
	return s, nil
}

// notifyLate sends a notification on every open subscription, as a master
// that tells of an earlier release only now.
func (d *redlockLike) notifyLate() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for s := range d.subs {
		s.send()
	}
}

// lateSub is a subscription of redlockLike.
type lateSub struct {
	d    *redlockLike
	in   driver.Subscription
	c    chan struct{}
	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup
}

func (s *lateSub) forward() {
	for {
		select {
		case <-s.stop:
			return
		case <-s.in.C():
			s.send()
		}
	}
}

func (s *lateSub) send() {
	select {
	case s.c <- struct{}{}:
	default:
	}
}

func (s *lateSub) C() <-chan struct{} { return s.c }

func (s *lateSub) Close() error {
	s.once.Do(func() {
		s.d.mu.Lock()
		delete(s.d.subs, s)
		s.d.mu.Unlock()
		close(s.stop)
	})
	s.wg.Wait()
	return s.in.Close()
}

// A lone waiter whose subscription brings notifications of earlier
// releases, before and while it waits, over a backend whose tries are slow
// and which cannot transfer (RedLock): while a lease of its own Client
// holds the lock, no try can succeed, so it stays offered and gets every
// handoff in process, without asking the backend; only every
// (maxTransfers+1)th Unlock yields through the backend. (It used to wake
// for each notification and try the backend meanwhile, so that the Unlock
// found no offer: the handoff then went through the masters.)
func TestLoneWaiterIgnoresLateNotificationsWhileItsClientHolds(t *testing.T) {
	ctx := t.Context()
	d := newRedlockLike()
	c := newClientOver(t, d)
	m, _ := c.Mutex("lone-late")
	held := testkit.Lock(t, ctx, m)
	const maxTransfers, cycles = 8, 3
	var yielded []int
	for i := 1; i <= cycles*(maxTransfers+1); i++ {
		acquires := d.acquires.Load()
		d.notifyLate() // pending before the waiter sleeps: it would wake at once
		held = handOver(t, c, m, held, d.notifyLate)
		switch n := d.acquires.Load() - acquires; {
		case n == 1:
			yielded = append(yielded, i)
		case n > 1:
			t.Errorf("handoff %d: %d acquisitions, want at most the one of a yield", i, n)
		}
	}
	if want := []int{9, 18, 27}; !slices.Equal(yielded, want) {
		t.Errorf("handoffs %v went through the backend, want %v (every %dth)", yielded, want, maxTransfers+1)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A lone waiter that waits for a lease of its own Client does not wait for
// it forever when that lease is lost: reported by the backend, found by a
// renewal (lost silently: the backend says nothing, and its notification of
// the free lock is ignored while the lease is believed to hold), or expired
// at its deadline without renewal. It then tries the backend, and gets the
// lock.
func TestLoneWaiterTriesWhenItsClientsLeaseIsLost(t *testing.T) {
	for name, tc := range map[string]struct {
		opts   []memory.Option
		mutex  []dlock.Option
		tamper bool
	}{
		"reported":         {mutex: []dlock.Option{dlock.WithTTL(time.Hour)}, tamper: true},
		"found by renewal": {opts: []memory.Option{memory.WithoutLossReports()}, mutex: []dlock.Option{dlock.WithTTL(300 * time.Millisecond)}, tamper: true},
		"expired":          {mutex: []dlock.Option{dlock.WithTTL(300 * time.Millisecond), dlock.WithoutRenewal()}},
	} {
		t.Run(name, func(t *testing.T) {
			d := newRedlockLike(tc.opts...)
			c := newClientOver(t, d)
			m := testkit.Mutex(t, c, "lone-lost", tc.mutex...)
			held := mustLock(t, m)
			waitCtx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			got := lockAsync(waitCtx, m.Lock)
			waitUntil(t, "the waiter's offer", func() bool { return dlock.Offered(c, m.Key()) || held.Err() != nil })
			if tc.tamper && !d.b.Tamper(m.Key(), false) {
				t.Fatal("the lock was not held to tamper with")
			}
			r := <-got
			if r.err != nil {
				t.Fatalf("the waiter's Lock: %v (the holder: %v)", r.err, held.Err())
			}
			if !errors.Is(held.Err(), dlock.ErrLockLost) {
				t.Errorf("the holder's Err: %v, want ErrLockLost", held.Err())
			}
			if err := r.l.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
		})
	}
}
