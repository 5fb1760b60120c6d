package hazelcast

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hazelcast/hazelcast-go-client"
)

// Loss signalling. Members release every lock of a client that has lost its
// connections to the cluster, once no member has had a connection from it for
// hazelcast.client.cleanup.timeout.millis (120 s by default, checked every
// 10 s, and an operator may lower it). A client that is disconnected
// cannot know when that happens, so the driver treats a disconnection as the
// loss of every lease granted before it: each lease watches the connection
// epoch that was current when its grant was asked for, and reports its loss
// (OnLoss) when that epoch ends. The epoch ends (with the reason as its
// cause) when the client reports that it disconnected, connected to another
// cluster, or shut down, or when the driver closes. Leases granted after a reconnection belong to the next
// epoch. A grant whose answer crossed a disconnection is therefore reported
// lost at once: conservative, never late.
//
// While the client is disconnected, calls would only queue in the client
// until it reconnects: a blocking Acquire waits for the reconnection
// (bounded by its context), one that tries once fails at once, and a lease's
// Extend reports the loss.
//
// The client's events are trusted for the end of an epoch, never as the only
// news of a reconnection: hazelcast-go-client v1.6.0 publishes Connected only
// when its connection manager restarts in full, and publishes Disconnected
// from another goroutine whenever its last connection closes. When a
// connection appears between the two (smart routing's member sync every
// second, or a connection from a reconnection attempt that failed half-way
// and closes late), the client cancels its restart as "there are active
// connections" and is connected again without a Connected event; and the
// two goroutines' events are not ordered, so a stale Disconnected can come
// after a Connected. Trusting the last event, the driver then saw a
// connected client as disconnected for good, and Acquire waited until its
// context ended. So while the session is down, the driver re-checks: every
// recheckInterval it asks the cluster something that touches no lock
// (watch), and an answer begins the next epoch. That is as safe as a
// Connected event: the question is asked after the epoch ended, so its
// answer comes over a connection made after the disconnection, and a
// Disconnected event that comes later still ends the new epoch.
//
// Not covered (a gap of hazelcast-go-client v1.6.0 the driver cannot reach):
// the client's reconnection authenticates with context.Background(). When
// the connection of that attempt closes at once (a load balancer or port
// proxy accepting before the member listens: see Limitations), the
// authentication can be left waiting forever, and the client never
// reconnects: Acquire then waits until its context ends. Only a new client
// gets out of that state.

// The causes of a lost epoch, as context.Cause of a lease's epoch, and so
// the reasons leases report to OnLoss.
var (
	errDisconnected = errors.New("hazelcast: the client lost its connection to the cluster, whose members release its locks after their client cleanup timeout")
	errNewCluster   = errors.New("hazelcast: the client connected to a different cluster (a restart without persistence?), which knows nothing of its locks")
	errShutdown     = errors.New("hazelcast: the client shut down, so its leases can no longer be renewed")
	errDriverClosed = errors.New("hazelcast: the driver was closed, so its leases can no longer be renewed")
)

// errNotConnected: a call was not made because the client is disconnected.
var errNotConnected = errors.New("hazelcast: the client is not connected to the cluster (it reconnects by itself)")

// session is the driver's view of the client's connection to the cluster.
type session struct {
	mu     sync.Mutex
	epoch  context.Context
	end    context.CancelCauseFunc
	up     chan struct{} // closed while connected, or once closed
	closed error         // why no new epoch will begin, once none will
}

func newSession() *session {
	s := &session{up: make(chan struct{})}
	close(s.up) // a client is connected when it is handed to the driver
	s.epoch, s.end = context.WithCancelCause(context.Background())
	return s
}

// current returns the current epoch: the one leases whose grant is asked
// for now watch.
func (s *session) current() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epoch
}

// connectedNow reports whether the client is connected, as far as its
// events tell.
func (s *session) connectedNow() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed == nil && s.epoch.Err() == nil
}

// over reports whether the session has closed: no epoch will begin again.
func (s *session) over() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed != nil
}

// waitConnected waits until the client is connected, or ctx ends (its error)
// or the session closes (why: errShutdown or errDriverClosed).
func (s *session) waitConnected(ctx context.Context) error {
	for {
		s.mu.Lock()
		up, closed, ok := s.up, s.closed, s.epoch.Err() == nil
		s.mu.Unlock()
		switch {
		case closed != nil:
			return closed
		case ok:
			return nil
		}
		select {
		case <-up:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// lose ends the current epoch with cause; the next connection begins another.
func (s *session) lose(cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed != nil {
		return
	}
	s.end(cause)
	select {
	case <-s.up:
		s.up = make(chan struct{})
	default:
	}
}

// connected begins a new epoch if the current one has ended.
func (s *session) connected() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed != nil || s.epoch.Err() == nil {
		return
	}
	s.epoch, s.end = context.WithCancelCause(context.Background())
	close(s.up)
}

// close ends the current epoch with cause, for good, and wakes waiters.
func (s *session) close(cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed != nil {
		return
	}
	s.closed = cause
	s.end(cause)
	select {
	case <-s.up:
	default:
		close(s.up)
	}
}

// onLifecycle is the client's lifecycle listener. The client calls it from
// one goroutine per listener, in the order of the events; it must not block.
func (s *session) onLifecycle(e hazelcast.LifecycleStateChanged) {
	switch e.State {
	case hazelcast.LifecycleStateConnected:
		s.connected()
	case hazelcast.LifecycleStateDisconnected:
		s.lose(errDisconnected)
	case hazelcast.LifecycleStateChangedCluster:
		// Published on reconnection, before Connected: the locks of the
		// last epoch are on a cluster that is gone.
		s.lose(errNewCluster)
	case hazelcast.LifecycleStateShuttingDown, hazelcast.LifecycleStateShutDown:
		s.close(errShutdown)
	}
}

// recheckInterval is how often a driver whose session is down asks the
// cluster whether the client is in fact connected again; the question gets
// as long again for its answer.
const recheckInterval = time.Second

// watch re-checks the connection while the session is down (see above), by
// asking ping, until the driver closes. Close waits for it.
func (d *Driver) watch(ping func(context.Context) error) {
	defer d.watching.Done()
	for {
		select {
		case <-d.session.current().Done():
		case <-d.closing.Done():
			return
		}
		t := time.NewTimer(recheckInterval)
		select {
		case <-t.C:
		case <-d.closing.Done():
			t.Stop()
			return
		}
		if d.session.over() {
			return // the client shut down: no epoch will begin again
		}
		if d.session.connectedNow() {
			continue // an event said so meanwhile
		}
		ctx, cancel := context.WithTimeout(d.closing, recheckInterval)
		err := ping(ctx)
		cancel()
		if err == nil {
			d.session.connected()
		}
	}
}
