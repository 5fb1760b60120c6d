package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

// waitQueued polls the waiters' queue of key until it has n entries: the
// test cannot be told when another client's refused attempt has queued it.
func waitQueued(t *testing.T, key string, n int64) {
	t.Helper()
	rdb := newRDB(t)
	for deadline := time.Now().Add(10 * time.Second); ; {
		got := queueLen(t, rdb, key)
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiters' queue of %q has %d entries, want %d", key, got, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// queueLen is how many Drivers the waiters' queue of key holds: its
// fields less the g: fields beside some of them and the cached order "q:"
// (see lua/prelude.lua).
func queueLen(t *testing.T, rdb *goredis.Client, key string) int64 {
	t.Helper()
	fields, err := rdb.HKeys(ctxFor(t), namesOf(DefaultKeyPrefix, key).waiters()).Result()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, f := range fields {
		if !strings.HasPrefix(f, "g:") && f != "q:" {
			n++
		}
	}
	return n
}

// Clients waiting for a lock get it in the order they were first refused,
// and a TryLock does not jump the queue.
func TestWaitingClientsServedInOrder(t *testing.T) {
	newClient := func() *dlock.Client {
		c := testkit.Client(t, newTestDriver(t, newRDB(t)), dlock.WithTTL(5*time.Second))
		return c
	}
	key := testkit.Key(t)
	holder, first, second, barger := newClient(), newClient(), newClient(), newClient()
	mutex := func(c *dlock.Client) dlock.Mutex {
		m := testkit.Mutex(t, c, key)
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
	key := testkit.Key(t)
	c1 := testkit.Client(t, newTestDriver(t, newRDB(t)), dlock.WithTTL(5*time.Second))
	c2 := testkit.Client(t, newTestDriver(t, newRDB(t)), dlock.WithTTL(5*time.Second))
	m1, _ := c1.Mutex(key)
	m2, _ := c2.Mutex(key)
	held := testkit.Lock(t, ctxFor(t), m1)
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
		t.Fatalf("waiters' queue after the only waiter gave up: %d fields (%v), want 0", n, err)
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
	key := testkit.Key(t)
	ctx := ctxFor(t)
	held := mustAcquire(t, holder, testkit.Request(key, 5*time.Second))

	waiting := queueWaiting(t, ctx, head, key)
	if _, err := other.Acquire(ctx, testkit.Request(key, 5*time.Second)); !errors.Is(err, driver.ErrLocked) {
		t.Fatalf("TryLock while held: got %v, want ErrLocked", err)
	}
	waitQueued(t, key, 1) // the waiting request queued; the TryLock did not

	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Acquire(ctx, testkit.Request(key, 5*time.Second)); !errors.Is(err, driver.ErrLocked) {
		t.Fatalf("TryLock of a free lock with a queued waiter: got %v, want ErrLocked", err)
	}
	l, err := head.Acquire(ctx, waiting)
	if err != nil {
		t.Fatalf("the queue's head: %v", err)
	}
	waitQueued(t, key, 0)
	_ = l.Release(ctx)
}

// queueWaiting makes a waiting request (Wait) for key, held by someone
// else, and has d send it once, which queues it and must find the lock
// taken; the request is returned for the waiter's later tries.
func queueWaiting(t *testing.T, ctx context.Context, d *Driver, key string) driver.Request {
	t.Helper()
	waiting := testkit.Request(key, 5*time.Second)
	waiting.Wait = true
	if _, err := d.Acquire(ctx, waiting); !errors.Is(err, driver.ErrLocked) {
		t.Fatalf("waiting request while held: got %v, want ErrLocked", err)
	}
	return waiting
}

// A release frees the lock and only wakes the queue's head when the head's
// attempt may not be granted by release (it carries a value): the lock
// stays free, and not granted to anyone, until the head's own request
// takes it. (A plain waiting attempt is granted by the release itself:
// grants_test.go.)
func TestReleaseOnlyWakesQueueHead(t *testing.T) {
	rdb := newRDB(t)
	holder, head := newTestDriver(t, rdb), newTestDriver(t, rdb)
	key := testkit.Key(t)
	n := namesOf(DefaultKeyPrefix, key)
	ctx := ctxFor(t)
	held := mustAcquire(t, holder, testkit.Request(key, 5*time.Second))
	waiting := testkit.Request(key, 5*time.Second)
	waiting.Wait, waiting.Value = true, "candidate"
	if _, err := head.Acquire(ctx, waiting); !isQueued(err, true) {
		t.Fatalf("waiting request while held: got %v, want a queued LockedError", err)
	}
	sub, err := head.Subscribe(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	waken(sub, 10*time.Second) // the subscription's confirmation

	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if !waken(sub, 10*time.Second) {
		t.Fatal("the queue's head was not woken by the release")
	}
	if got, err := rdb.Exists(ctx, n.lock).Result(); err != nil || got != 0 {
		t.Fatalf("the lock's key exists after its only hold was released (%v): a release must not grant", err)
	}
	waitQueued(t, key, 1) // still queued: only its own request takes the lock
	l, err := head.Acquire(ctx, waiting)
	if err != nil {
		t.Fatalf("the head's own request: %v", err)
	}
	if l.Token() <= held.Token() {
		t.Errorf("token %d after %d, want greater", l.Token(), held.Token())
	}
	waitQueued(t, key, 0)
	_ = l.Release(ctx)
}

// A waiting Driver refused because a stranger's value sits at the lock's
// name (an operator's, or an older layout's) is queued, or its entry
// renewed, as by any refusal, and is told to come back before the entry
// lapses, also when the value has no expiry.
func TestStrangerRefusalRenewsQueueEntry(t *testing.T) {
	rdb := newRDB(t)
	d := newTestDriver(t, rdb)
	ctx := ctxFor(t)
	const ttl = 1500 * time.Millisecond // a queue entry's lifetime: the TTL, at most 2 s
	for _, pexpire := range []time.Duration{time.Minute, 0} {
		key := testkit.Key(t)
		n := namesOf(DefaultKeyPrefix, key)
		if err := rdb.Set(ctx, n.lock, "stranger", pexpire).Err(); err != nil {
			t.Fatal(err)
		}
		req := testkit.Request(key, ttl)
		req.Wait = true
		var expiries []string
		for range 2 {
			_, err := d.Acquire(ctx, req)
			le, ok := errors.AsType[*driver.LockedError](err)
			if !ok {
				t.Fatalf("stranger's value (expiry %v): got %v, want a LockedError", pexpire, err)
			}
			if le.RetryAfter <= 0 || le.RetryAfter > queueLife(ttl)/3 {
				t.Errorf("stranger's value (expiry %v): RetryAfter %v, want within a third of the entry's lifetime, (0, %v]", pexpire, le.RetryAfter, queueLife(ttl)/3)
			}
			entry, err := rdb.HGet(ctx, n.waiters(), d.self).Result()
			if err != nil {
				t.Fatalf("stranger's value (expiry %v): the waiter's queue entry: %v", pexpire, err)
			}
			expiries = append(expiries, entry)
			time.Sleep(2 * time.Millisecond) // the server's clock moves on: a renewal shows as a later expiry
		}
		var seq0, exp0, seq1, exp1 int64
		if _, err := fmt.Sscanf(expiries[0]+" "+expiries[1], "%d %d %d %d", &seq0, &exp0, &seq1, &exp1); err != nil {
			t.Fatalf("queue entries %q: %v", expiries, err)
		}
		if seq1 != seq0 || exp1 <= exp0 {
			t.Errorf("stranger's value (expiry %v): queue entry %q then %q, want the same place with a later expiry", pexpire, expiries[0], expiries[1])
		}
		if v, _ := rdb.Get(ctx, n.lock).Result(); v != "stranger" {
			t.Errorf("the stranger's value became %q", v)
		}
	}
}

// A release that frees the lock for a queued Driver publishes on that
// Driver's personal channel alone, not on the lock's channel that every
// waiting Driver subscribes to: the other waiting Drivers' processes are
// not woken to drop a message that is not for them. With nobody queued,
// it publishes on the lock's channel. A refusal that queued the request
// says so (LockedError.Queued), so that the core waits for the wake-up
// instead of polling; a TryLock's refusal does not.
func TestReleasePublishesToHeadAlone(t *testing.T) {
	rdb := newRDB(t)
	holder, head, second := newTestDriver(t, rdb), newTestDriver(t, rdb), newTestDriver(t, rdb)
	key := testkit.Key(t)
	n := namesOf(DefaultKeyPrefix, key)
	ctx := ctxFor(t)

	// Every message on the lock's channel or any channel under it.
	watch := rdb.PSubscribe(ctx, n.channel()+"*")
	defer watch.Close()
	if _, err := watch.Receive(ctx); err != nil { // the confirmation
		t.Fatal(err)
	}
	next := func() *goredis.Message {
		t.Helper()
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		m, err := watch.ReceiveMessage(rctx)
		if err != nil {
			t.Fatalf("waiting for a release's message: %v", err)
		}
		return m
	}

	held := mustAcquire(t, holder, testkit.Request(key, 5*time.Second))
	if _, err := second.Acquire(ctx, testkit.Request(key, 5*time.Second)); !isQueued(err, false) {
		t.Errorf("TryLock refused: %v, want a LockedError that does not say queued", err)
	}
	for _, d := range []*Driver{head, second} {
		req := testkit.Request(key, 5*time.Second)
		req.Wait = true
		if _, err := d.Acquire(ctx, req); !isQueued(err, true) {
			t.Fatalf("waiting request refused: %v, want a LockedError that says queued", err)
		}
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	m := next()
	if want := personalChannel(n.channel(), head.self); m.Channel != want || !strings.HasPrefix(m.Payload, head.self+" ") {
		t.Fatalf("release published %q on %q, want a grant to %q on the head's channel %q", m.Payload, m.Channel, head.self, want)
	}
	grant := m.Payload
	// Nothing else was published: a marker sent now is the next message.
	if err := rdb.Publish(ctx, n.channel(), "marker").Err(); err != nil {
		t.Fatal(err)
	}
	if m := next(); m.Channel != n.channel() || m.Payload != "marker" {
		t.Fatalf("release also published %q on %q", m.Payload, m.Channel)
	}

	// With the queue emptied, a release publishes on the lock's channel:
	// that of the hold the first release granted the head.
	if err := rdb.Del(ctx, n.waiters()).Err(); err != nil {
		t.Fatal(err)
	}
	if ok, err := release(ctx, rdb, n, strings.Fields(grant)[1], "PUBLISH"); err != nil || !ok {
		t.Fatalf("release of the head's grant: %v, %v", ok, err)
	}
	if m := next(); m.Channel != n.channel() || m.Payload != "" {
		t.Fatalf("release with nobody queued published %q on %q, want an empty message on %q", m.Payload, m.Channel, n.channel())
	}
}

// isQueued reports whether err is a LockedError whose Queued is queued.
func isQueued(err error, queued bool) bool {
	le, ok := errors.AsType[*driver.LockedError](err)
	return ok && le.Queued == queued
}
