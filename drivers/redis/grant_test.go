package redis

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// waitGrant polls d until a release's message has announced it a grant of
// the lock n: the test cannot be told when the message arrives.
func waitGrant(t *testing.T, d *Driver, n names) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		d.queuedMu.Lock()
		st := d.queued[n.lock]
		got := st != nil && st.token != 0
		d.queuedMu.Unlock()
		if got {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no grant was announced to the queue's head")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waiting queues d for key, as the core's waiting head does: a refused
// attempt that waits, and a subscription.
func waiting(t *testing.T, d *Driver, key string) driver.Subscription {
	t.Helper()
	req := reqFor(key, 5*time.Second)
	req.Wait = true
	if _, err := d.TryAcquire(ctxFor(t), req); !errors.Is(err, driver.ErrLocked) {
		t.Fatalf("the waiter's attempt: %v, want ErrLocked", err)
	}
	sub, err := d.Subscribe(ctxFor(t), key)
	if err != nil {
		t.Fatal(err)
	}
	return sub
}

// A release that frees the lock grants it to the queue's head, whose
// Driver then holds it without a request of its own.
func TestReleaseGrantsQueueHead(t *testing.T) {
	rdb := newRDB(t)
	holder, head := newTestDriver(t, rdb), newTestDriver(t, rdb)
	key := testKey(t)
	n := namesOf(DefaultKeyPrefix, key)
	held := mustAcquire(t, holder, reqFor(key, 5*time.Second))
	sub := waiting(t, head, key)
	defer sub.Close()

	if err := held.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	waitGrant(t, head, n)
	req := reqFor(key, 5*time.Second)
	req.Wait = true
	dl, err := head.TryAcquire(ctxFor(t), req)
	if err != nil {
		t.Fatalf("the head's attempt after the grant: %v", err)
	}
	l := dl.(*lease)
	if !strings.HasPrefix(l.id, "q:"+head.self+":") {
		t.Errorf("lease id %q: want the release's grant, taken without a request", l.id)
	}
	if l.Token() <= held.Token() {
		t.Errorf("token %d after %d, want greater", l.Token(), held.Token())
	}
	if v := l.Validity(); v <= 0 || v > maxQueueLife {
		t.Errorf("validity %v: want within the queue entry's lifetime, %v", v, maxQueueLife)
	}
	if _, err := holder.TryAcquire(ctxFor(t), reqFor(key, 5*time.Second)); !errors.Is(err, driver.ErrLocked) {
		t.Fatalf("another client's TryAcquire after the grant: %v, want ErrLocked", err)
	}
	if err := l.Extend(ctxFor(t), 5*time.Second); err != nil {
		t.Fatalf("Extend of the granted lease: %v", err)
	}
	if err := l.Release(ctxFor(t)); err != nil {
		t.Fatalf("Release of the granted lease: %v", err)
	}
	if n, err := rdb.Exists(ctxFor(t), n.lock, n.waiters()).Result(); err != nil || n != 0 {
		t.Fatalf("%d of the lock's keys left after its release (%v), want none", n, err)
	}
}

// A head that stops waiting before it takes its grant leaves the queue, and
// the grant goes on to the next head; the first head cannot take it later.
func TestLeavingHeadPassesItsGrantOn(t *testing.T) {
	rdb := newRDB(t)
	holder, first, second := newTestDriver(t, rdb), newTestDriver(t, rdb), newTestDriver(t, rdb)
	key := testKey(t)
	n := namesOf(DefaultKeyPrefix, key)
	held := mustAcquire(t, holder, reqFor(key, 5*time.Second))
	firstSub := waiting(t, first, key)
	secondSub := waiting(t, second, key)
	defer secondSub.Close()

	if err := held.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	waitGrant(t, first, n)
	if err := firstSub.Close(); err != nil { // its waiters gave up
		t.Fatal(err)
	}
	waitGrant(t, second, n)
	req := reqFor(key, 5*time.Second)
	req.Wait = true
	if _, err := first.TryAcquire(ctxFor(t), req); !errors.Is(err, driver.ErrLocked) {
		t.Fatalf("the first head's attempt after leaving: %v, want ErrLocked (its grant went on)", err)
	}
	dl, err := second.TryAcquire(ctxFor(t), req)
	if err != nil {
		t.Fatalf("the second head's attempt: %v", err)
	}
	if err := dl.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
}
