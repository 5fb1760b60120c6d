package hazelcast

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hazelcast/hazelcast-go-client"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

// lostBy reports why l's connection epoch ended, or nil while it has not.
func lostBy(l *lease) error {
	if l.lost.Err() == nil {
		return nil
	}
	return context.Cause(l.lost)
}

func TestLeasesLostWithTheConnection(t *testing.T) {
	testkit.NoLeaks(t)
	d := newMemberDriver(t, "")
	event := func(s hazelcast.LifecycleState) { d.session.onLifecycle(hazelcast.LifecycleStateChanged{State: s}) }

	l1 := d.acquire(t, testkit.Key(t))
	if err := lostBy(l1); err != nil {
		t.Fatalf("a new lease is lost: %v", err)
	}
	event(hazelcast.LifecycleStateStarted) // not a loss
	if err := lostBy(l1); err != nil {
		t.Fatalf("lost on an unrelated event: %v", err)
	}

	event(hazelcast.LifecycleStateDisconnected)
	if err := lostBy(l1); !errors.Is(err, errDisconnected) {
		t.Errorf("after a disconnection the lease's epoch ended by %v, want errDisconnected", err)
	}
	if err := l1.Extend(ctxFor(t), testTTL); !errors.Is(err, driver.ErrNotHeld) || !errors.Is(err, errDisconnected) {
		t.Errorf("Extend after a disconnection: %v, want ErrNotHeld for errDisconnected", err)
	}
	// While disconnected, no call is made: an Acquire that tries once and
	// Release fail at once, and a blocking Acquire waits for the
	// reconnection.
	_, before := d.rec.ops(0)
	if _, err := d.Acquire(ctxFor(t), testkit.Request(testkit.Key(t), testTTL)); !errors.Is(err, errNotConnected) {
		t.Errorf("Acquire while disconnected: %v, want errNotConnected", err)
	}
	if err := l1.Release(ctxFor(t)); !errors.Is(err, errNotConnected) {
		t.Errorf("Release while disconnected: %v, want errNotConnected", err)
	}
	if ops, _ := d.rec.ops(before); len(ops) != 0 {
		t.Errorf("calls made while disconnected: %v", ops)
	}
	got := make(chan driver.Lease, 1)
	go func() {
		l, err := d.Acquire(ctxFor(t), testkit.Blocking(testkit.Request(testkit.Key(t), testTTL)))
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
	l3 := d.acquire(t, testkit.Key(t))
	event(hazelcast.LifecycleStateConnected) // a repeated event begins nothing new
	if err := lostBy(l3); err != nil {
		t.Fatalf("a repeated Connected ended the epoch: %v", err)
	}

	event(hazelcast.LifecycleStateChangedCluster)
	if err := lostBy(l3); !errors.Is(err, errNewCluster) {
		t.Errorf("after a cluster change the epoch ended by %v, want errNewCluster", err)
	}
	event(hazelcast.LifecycleStateConnected)
	l4 := d.acquire(t, testkit.Key(t))
	event(hazelcast.LifecycleStateShuttingDown)
	if err := lostBy(l4); !errors.Is(err, errShutdown) {
		t.Errorf("after a shutdown the epoch ended by %v, want errShutdown", err)
	}
	event(hazelcast.LifecycleStateConnected) // no epoch begins after a shutdown
	if d.session.connectedNow() {
		t.Error("an epoch began after the client shut down")
	}
	if _, err := d.Acquire(ctxFor(t), testkit.Blocking(testkit.Request(testkit.Key(t), testTTL))); !errors.Is(err, errShutdown) {
		t.Errorf("Acquire after the client shut down: %v, want errShutdown", err)
	}
}

// OnLoss tells the reason once when the epoch ends, at once when it ended
// already, and never after Release.
func TestOnLossReportsTheEpochsEnd(t *testing.T) {
	testkit.NoLeaks(t)
	d := newMemberDriver(t, "")
	event := func(s hazelcast.LifecycleState) { d.session.onLifecycle(hazelcast.LifecycleStateChanged{State: s}) }
	watched, released, late := d.acquire(t, testkit.Key(t)), d.acquire(t, testkit.Key(t)), d.acquire(t, testkit.Key(t))
	told := make(chan error, 3)
	watched.OnLoss(func(reason error) { told <- reason })
	releasedTold := make(chan error, 1)
	released.OnLoss(func(reason error) { releasedTold <- reason })
	if err := released.Release(ctxFor(t)); err != nil {
		t.Fatalf("Release: %v", err)
	}

	event(hazelcast.LifecycleStateDisconnected)
	select {
	case reason := <-told:
		if !errors.Is(reason, errDisconnected) {
			t.Errorf("OnLoss told %v, want errDisconnected", reason)
		}
	case <-ctxFor(t).Done():
		t.Fatal("OnLoss told nothing after a disconnection")
	}
	// Already lost: told from OnLoss itself.
	var lateReason error
	late.OnLoss(func(reason error) { lateReason = reason })
	if !errors.Is(lateReason, errDisconnected) {
		t.Errorf("OnLoss on a lease already lost told %v, want errDisconnected at once", lateReason)
	}
	event(hazelcast.LifecycleStateConnected)
	event(hazelcast.LifecycleStateDisconnected) // a later epoch's end is not this lease's
	time.Sleep(50 * time.Millisecond)
	select {
	case reason := <-told:
		t.Errorf("OnLoss told a second time: %v", reason)
	case reason := <-releasedTold:
		t.Errorf("OnLoss told a released lease: %v", reason)
	default:
	}
	event(hazelcast.LifecycleStateConnected)
	_ = watched.Release(ctxFor(t))
	_ = late.Release(ctxFor(t))
}

func TestCloseEndsEveryLease(t *testing.T) {
	testkit.NoLeaks(t)
	d := newMemberDriver(t, "")
	l := d.acquire(t, testkit.Key(t))
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := lostBy(l); !errors.Is(err, errDriverClosed) {
		t.Errorf("after Close the epoch's cause is %v, want errDriverClosed", err)
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
