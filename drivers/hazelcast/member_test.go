package hazelcast

// Tests against a real cluster, beyond the conformance suite: what only a
// member can show about ownership, cancelled waits and disconnections. They
// skip without a cluster (see main_test.go).

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// Two Drivers over one Hazelcast client exclude each other, and a caller of
// that client using a plain context (the shared lock ID 0) can neither
// unlock nor enter a dlock lock.
func TestSharedClientOwnershipMember(t *testing.T) {
	hz := rawClient(t)
	mapName := testMapName()
	d1, err := New(ctxFor(t), hz, WithMap(mapName))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	d2, err := New(ctxFor(t), hz, WithMap(mapName))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	key := testkit.Key(t)
	l, err := d1.Acquire(ctxFor(t), testkit.Request(key, 10*time.Second))
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if _, err := d2.Acquire(ctxFor(t), testkit.Request(key, 10*time.Second)); !errors.Is(err, driver.ErrLocked) {
		t.Fatalf("a second Driver on the same client: %v, want ErrLocked", err)
	}
	m, err := hz.GetMap(ctxFor(t), mapName)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Unlock(ctxFor(t), mapKey(key)); !isNotOwner(err) {
		t.Errorf("Unlock with the client's plain context: %v, want IllegalMonitorState", err)
	}
	if ok, err := m.TryLock(ctxFor(t), mapKey(key)); err != nil || ok {
		t.Errorf("TryLock with the client's plain context: %t, %v, want refused", ok, err)
	}
	if err := l.Extend(ctxFor(t), 10*time.Second); err != nil {
		t.Errorf("the holder's Extend: %v", err)
	}
	if err := l.Release(ctxFor(t)); err != nil {
		t.Errorf("Release: %v", err)
	}
	if locked, err := m.IsLocked(ctxFor(t), mapKey(key)); err != nil || locked {
		t.Errorf("IsLocked after Release: %t, %v", locked, err)
	}
	if err := d1.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if !hz.Running() {
		t.Error("Close shut down the caller's client")
	}
	if _, err := d2.Acquire(ctxFor(t), testkit.Request(key, 10*time.Second)); err != nil {
		t.Errorf("the other Driver after Close: %v", err)
	}
}

// A force-unlocked lock that nobody took is not resurrected by Extend.
func TestExtendAfterForceUnlockMember(t *testing.T) {
	mapName := testMapName()
	d := openMember(t, mapName)
	hz := rawClient(t)
	m, err := hz.GetMap(ctxFor(t), mapName)
	if err != nil {
		t.Fatal(err)
	}
	key := testkit.Key(t)
	l, err := d.Acquire(ctxFor(t), testkit.Request(key, 10*time.Second))
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if err := m.ForceUnlock(ctxFor(t), mapKey(key)); err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(ctxFor(t), 10*time.Second); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("Extend after a force-unlock: %v, want ErrNotHeld", err)
	}
	if locked, err := m.IsLocked(ctxFor(t), mapKey(key)); err != nil || locked {
		t.Fatalf("the lock is held after a refused Extend: %t, %v", locked, err)
	}
}

// Keys that differ only where the key escaping works stay distinct locks.
func TestEscapedKeysStayDistinctMember(t *testing.T) {
	d := openMember(t, testMapName())
	base := testkit.Key(t)
	var held []driver.Lease
	for _, k := range []string{base + "\xff", base + "%FF", base + "%25FF", base + "\uFFFD"} {
		l, err := d.Acquire(ctxFor(t), testkit.Request(k, 10*time.Second))
		if err != nil {
			t.Fatalf("Acquire(%q) while holding %d twins: %v", k, len(held), err)
		}
		held = append(held, l)
	}
	for _, l := range held {
		if err := l.Release(ctxFor(t)); err != nil {
			t.Error(err)
		}
	}
}

// spyAPI tells when a wait reaches the member.
type spyAPI struct {
	api
	waiting chan struct{}
}

func (s spyAPI) tryLock(ctx context.Context, key string, lease, wait time.Duration) (bool, error) {
	if wait > 0 {
		select {
		case s.waiting <- struct{}{}:
		default:
		}
	}
	return s.api.tryLock(ctx, key, lease, wait)
}

// Cancelling a Lock sends nothing to the member: a wait it granted after the
// caller gave up must be given back before Acquire returns.
func TestCancelledWaitMember(t *testing.T) {
	mapName := testMapName()
	holder := openMember(t, mapName)
	waiter := openMember(t, mapName)
	waiter.waitSlice = time.Minute
	spy := spyAPI{api: waiter.api, waiting: make(chan struct{}, 1)}
	waiter.api = spy
	key := testkit.Key(t)
	l, err := holder.Acquire(ctxFor(t), testkit.Request(key, 10*time.Second))
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	ctx, cancel := context.WithCancel(ctxFor(t))
	errc := make(chan error, 1)
	go func() {
		_, err := waiter.Acquire(ctx, testkit.Blocking(testkit.Request(key, 10*time.Second)))
		errc <- err
	}()
	<-spy.waiting // the wait is on its way to the member
	cancel()
	if err := l.Release(ctxFor(t)); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := <-errc; err != context.Canceled {
		t.Fatalf("cancelled Acquire: %v, want exactly context.Canceled", err)
	}
	probe := openMember(t, mapName)
	lp, err := probe.Acquire(ctxFor(t), testkit.Request(key, 10*time.Second))
	if err != nil {
		t.Fatalf("the lock is not free after a cancelled Acquire returned: %v", err)
	}
	_ = lp.Release(ctxFor(t))
}

// Stopping the member disconnects the client: every lease is reported lost
// at once, a try fails while the client is disconnected, and once the
// member is back the same Driver reconnects by itself: Acquire waits for
// it, and its grants belong to a new epoch, with greater tokens. The Driver
// reaches the member through a front that refuses connections while the
// member is down, as the member's own host would (see
// testserver.HazelcastFront).
func TestDisconnectReportsLossMember(t *testing.T) {
	server.NeedFaults(t)
	front := testserver.NewHazelcastFront(t, server.Server)
	u := memberURL(t, testMapName())
	u.Host = front.Addr()
	d := testkit.Closing(t, "open", func() (driver.Driver, error) { return open(ctxFor(t), u) }).(*Driver)
	key := testkit.Key(t)
	l, err := d.Acquire(ctxFor(t), testkit.Request(key, 10*time.Second))
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	lost := make(chan error, 1)
	l.OnLoss(func(reason error) { lost <- reason })
	// Generous: a JVM restarting on a loaded 2-core machine can take a
	// minute, and the client then reconnects after its retry backoff
	// (growing from 1 s while the member was down, up to 30 s).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := front.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	started := false
	t.Cleanup(func() {
		if !started {
			_ = front.Start(context.Background())
		}
	})
	var cause error
	select {
	case cause = <-lost:
	case <-ctx.Done():
		t.Fatal("no loss reported after the member stopped")
	}
	if !errors.Is(cause, errDisconnected) {
		t.Errorf("loss reported with %v, want errDisconnected", cause)
	}
	if _, err := d.Acquire(ctxFor(t), testkit.Request(testkit.Key(t), 10*time.Second)); !errors.Is(err, errNotConnected) {
		t.Errorf("Acquire while disconnected: %v, want errNotConnected", err)
	}
	if err := front.Start(ctx); err != nil {
		t.Fatal(err)
	}
	started = true
	// The member lost its data: the same key is free, for the same Driver,
	// once its client has reconnected.
	back := time.Now()
	l2, err := d.Acquire(ctx, testkit.Blocking(testkit.Request(key, 10*time.Second)))
	if err != nil {
		t.Fatalf("Acquire after the member came back: %v", err)
	}
	t.Logf("reconnected and granted %v after the member answered again", time.Since(back).Round(time.Millisecond))
	lost2 := make(chan error, 1)
	l2.OnLoss(func(reason error) { lost2 <- reason })
	select {
	case err := <-lost2:
		t.Errorf("a lease granted after reconnecting is lost: %v", err)
	default:
	}
	if l2.Token() <= l.Token() {
		t.Errorf("tokens %d then %d across a restart, want increasing", l.Token(), l2.Token())
	}
	if err := l2.Extend(ctxFor(t), 10*time.Second); err != nil {
		t.Errorf("Extend after reconnecting: %v", err)
	}
	if err := l2.Release(ctxFor(t)); err != nil {
		t.Errorf("Release after reconnecting: %v", err)
	}
	if l3, err := d.Acquire(ctxFor(t), testkit.Request(key, 10*time.Second)); err != nil {
		t.Errorf("a try after reconnecting: %v", err)
	} else if err := l3.Release(ctxFor(t)); err != nil {
		t.Errorf("Release: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}
