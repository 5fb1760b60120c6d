package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// waitQueued polls the waiters' queue of key until it has n entries: the
// test cannot be told when another client's refused attempt has queued it.
func waitQueued(t *testing.T, key string, n int64) {
	t.Helper()
	rdb := newRDB(t)
	q := namesOf(DefaultKeyPrefix, key).waiters()
	for deadline := time.Now().Add(10 * time.Second); ; {
		got, err := rdb.HLen(ctxFor(t), q).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiters' queue of %q has %d entries, want %d", key, got, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Clients waiting for a lock get it in the order they were first refused,
// and a TryLock does not jump the queue.
func TestWaitingClientsServedInOrder(t *testing.T) {
	newClient := func() *dlock.Client {
		c, err := dlock.New(newTestDriver(t, newRDB(t)), dlock.WithTTL(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		return c
	}
	key := testKey(t)
	holder, first, second, barger := newClient(), newClient(), newClient(), newClient()
	mutex := func(c *dlock.Client) dlock.Mutex {
		m, err := c.Mutex(key)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	held, err := mutex(holder).Lock(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		l   dlock.Lease
		err error
	}
	lockIn := func(m dlock.Mutex) chan result {
		ch := make(chan result, 1)
		go func() {
			l, err := m.Lock(ctxFor(t))
			ch <- result{l, err}
		}()
		return ch
	}
	firstGot := lockIn(mutex(first))
	waitQueued(t, key, 1)
	secondGot := lockIn(mutex(second))
	waitQueued(t, key, 2)

	if err := held.Unlock(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	r := <-firstGot
	if r.err != nil {
		t.Fatalf("first waiter: %v", r.err)
	}
	select {
	case r2 := <-secondGot:
		t.Fatalf("the second waiter got the lock while the first held it: %v", r2.err)
	default:
	}
	if _, err := mutex(barger).TryLock(ctxFor(t)); !errors.Is(err, dlock.ErrLocked) {
		t.Fatalf("TryLock while held: got %v, want ErrLocked", err)
	}
	if err := r.l.Unlock(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	r = <-secondGot
	if r.err != nil {
		t.Fatalf("second waiter: %v", r.err)
	}
	_ = r.l.Unlock(ctxFor(t))
	waitQueued(t, key, 0)
}

// A waiter that gives up leaves the queue at once, so the lock is not held
// up until its entry lapses.
func TestCancelledWaiterLeavesQueue(t *testing.T) {
	key := testKey(t)
	c1, err := dlock.New(newTestDriver(t, newRDB(t)), dlock.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close(context.Background())
	c2, err := dlock.New(newTestDriver(t, newRDB(t)), dlock.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close(context.Background())
	m1, _ := c1.Mutex(key)
	m2, _ := c2.Mutex(key)
	held, err := m1.Lock(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctxFor(t))
	gaveUp := make(chan error, 1)
	go func() {
		_, err := m2.Lock(ctx)
		gaveUp <- err
	}()
	waitQueued(t, key, 1)
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Lock: %v", err)
	}
	// Lock leaves the queue before it returns: no waiting for a lapse.
	if n, err := newRDB(t).HLen(ctxFor(t), namesOf(DefaultKeyPrefix, key).waiters()).Result(); err != nil || n != 0 {
		t.Fatalf("waiters' queue after the only waiter gave up: %d entries (%v), want 0", n, err)
	}
	if err := held.Unlock(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	l, err := m1.TryLock(ctxFor(t))
	if err != nil {
		t.Fatalf("TryLock after the only waiter gave up: %v", err)
	}
	_ = l.Unlock(ctxFor(t))
}

// Driver level: a free lock goes to the queue's head only, a request
// without Wait neither queues nor jumps the queue, and the head leaves the
// queue when granted.
func TestFreeLockGoesToQueueHead(t *testing.T) {
	rdb := newRDB(t)
	holder, head, other := newTestDriver(t, rdb), newTestDriver(t, rdb), newTestDriver(t, rdb)
	key := testKey(t)
	ctx := ctxFor(t)
	held := mustAcquire(t, holder, reqFor(key, 5*time.Second))

	waiting := reqFor(key, 5*time.Second)
	waiting.Wait = true
	if _, err := head.TryAcquire(ctx, waiting); !errors.Is(err, driver.ErrLocked) {
		t.Fatalf("waiting request while held: got %v, want ErrLocked", err)
	}
	if _, err := other.TryAcquire(ctx, reqFor(key, 5*time.Second)); !errors.Is(err, driver.ErrLocked) {
		t.Fatalf("TryLock while held: got %v, want ErrLocked", err)
	}
	waitQueued(t, key, 1) // the waiting request queued; the TryLock did not

	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := other.TryAcquire(ctx, reqFor(key, 5*time.Second)); !errors.Is(err, driver.ErrLocked) {
		t.Fatalf("TryLock of a free lock with a queued waiter: got %v, want ErrLocked", err)
	}
	l, err := head.TryAcquire(ctx, waiting)
	if err != nil {
		t.Fatalf("the queue's head: %v", err)
	}
	waitQueued(t, key, 0)
	_ = l.Release(ctx)
}
