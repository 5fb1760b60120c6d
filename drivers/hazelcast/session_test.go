package hazelcast

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/hazelcast/hazelcast-go-client"

	"github.com/dlock-go/dlock/driver"
)

// lostBy reports why l's Lost context ended, or nil while it has not.
func lostBy(l *lease) error {
	if l.Lost().Err() == nil {
		return nil
	}
	return context.Cause(l.Lost())
}

func TestLeasesLostWithTheConnection(t *testing.T) {
	noLeaks(t)
	d := newMemberDriver(t, "")
	event := func(s hazelcast.LifecycleState) { d.session.onLifecycle(hazelcast.LifecycleStateChanged{State: s}) }

	l1 := d.acquire(t, testKey(t))
	if err := lostBy(l1); err != nil {
		t.Fatalf("a new lease is lost: %v", err)
	}
	event(hazelcast.LifecycleStateStarted) // not a loss
	if err := lostBy(l1); err != nil {
		t.Fatalf("lost on an unrelated event: %v", err)
	}

	event(hazelcast.LifecycleStateDisconnected)
	if err := lostBy(l1); !errors.Is(err, errDisconnected) {
		t.Errorf("after a disconnection the lease's Lost cause is %v, want errDisconnected", err)
	}
	if err := l1.Extend(ctxFor(t), testTTL); !errors.Is(err, driver.ErrNotHeld) || !errors.Is(err, errDisconnected) {
		t.Errorf("Extend after a disconnection: %v, want ErrNotHeld for errDisconnected", err)
	}
	// While disconnected, no call is made: TryAcquire and Release fail at
	// once, and Acquire waits for the reconnection.
	_, before := d.rec.ops(0)
	if _, err := d.TryAcquire(ctxFor(t), request(testKey(t), testTTL)); !errors.Is(err, errNotConnected) {
		t.Errorf("TryAcquire while disconnected: %v, want errNotConnected", err)
	}
	if err := l1.Release(ctxFor(t)); !errors.Is(err, errNotConnected) {
		t.Errorf("Release while disconnected: %v, want errNotConnected", err)
	}
	if ops, _ := d.rec.ops(before); len(ops) != 0 {
		t.Errorf("calls made while disconnected: %v", ops)
	}
	got := make(chan driver.Lease, 1)
	go func() {
		l, err := d.Acquire(ctxFor(t), request(testKey(t), testTTL))
		if err != nil {
			t.Errorf("Acquire across a reconnection: %v", err)
		}
		got <- l
	}()
	event(hazelcast.LifecycleStateConnected)
	l2, _ := (<-got).(*lease)
	if l2 == nil {
		t.FailNow()
	}
	if err := lostBy(l2); err != nil {
		t.Fatalf("a lease granted after reconnecting is lost: %v", err)
	}
	if err := l1.Release(ctxFor(t)); err != nil {
		t.Errorf("Release of a lost lease after reconnecting: %v (the member kept its lock)", err)
	}
	l3 := d.acquire(t, testKey(t))
	event(hazelcast.LifecycleStateConnected) // a repeated event begins nothing new
	if err := lostBy(l3); err != nil {
		t.Fatalf("a repeated Connected ended the epoch: %v", err)
	}

	event(hazelcast.LifecycleStateChangedCluster)
	if err := lostBy(l3); !errors.Is(err, errNewCluster) {
		t.Errorf("after a cluster change the Lost cause is %v, want errNewCluster", err)
	}
	event(hazelcast.LifecycleStateConnected)
	l4 := d.acquire(t, testKey(t))
	event(hazelcast.LifecycleStateShuttingDown)
	if err := lostBy(l4); !errors.Is(err, errShutdown) {
		t.Errorf("after a shutdown the Lost cause is %v, want errShutdown", err)
	}
	event(hazelcast.LifecycleStateConnected) // no epoch begins after a shutdown
	if d.session.connectedNow() {
		t.Error("an epoch began after the client shut down")
	}
	if _, err := d.Acquire(ctxFor(t), request(testKey(t), testTTL)); !errors.Is(err, errShutdown) {
		t.Errorf("Acquire after the client shut down: %v, want errShutdown", err)
	}
}

func TestCloseEndsEveryLease(t *testing.T) {
	noLeaks(t)
	d := newMemberDriver(t, "")
	l := d.acquire(t, testKey(t))
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := lostBy(l); !errors.Is(err, errDriverClosed) {
		t.Errorf("after Close the Lost cause is %v, want errDriverClosed", err)
	}
}

// A client that is connected again without telling (no Connected event
// after the last Disconnected, as hazelcast-go-client v1.6.0 can do) is
// found by the watch, and a waiting Acquire goes on; while the cluster does
// not answer, the session stays down.
func TestWatchFindsSilentReconnection(t *testing.T) {
	d := newDriver(nil, defaultOptions(), newSession())
	var answering atomic.Bool
	d.watching.Add(1)
	go d.watch(func(ctx context.Context) error {
		if answering.Load() {
			return nil
		}
		<-ctx.Done()
		return ctx.Err()
	})
	defer d.Close()
	d.session.lose(errDisconnected)
	short, cancel := context.WithTimeout(context.Background(), 2*recheckInterval)
	defer cancel()
	if err := d.session.waitConnected(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waitConnected while the cluster does not answer: %v, want the deadline", err)
	}
	answering.Store(true)
	if err := d.session.waitConnected(ctxFor(t)); err != nil {
		t.Fatalf("waitConnected once the cluster answers: %v", err)
	}
	if err := d.session.current().Err(); err != nil {
		t.Fatalf("the epoch begun by the watch has ended: %v", err)
	}
}

// Once the client has shut down, the watch stops asking: no epoch will
// begin again.
func TestWatchEndsWithTheSession(t *testing.T) {
	d := newDriver(nil, defaultOptions(), newSession())
	d.watching.Add(1)
	go d.watch(func(context.Context) error { return errors.New("client not active") })
	d.session.onLifecycle(hazelcast.LifecycleStateChanged{State: hazelcast.LifecycleStateShutDown})
	ended := make(chan struct{})
	go func() { d.watching.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-ctxFor(t).Done():
		t.Fatal("the watch goes on after the client shut down")
	}
	_ = d.Close()
}
