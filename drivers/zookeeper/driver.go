package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/deadline"
	"github.com/dlock-go/dlock/internal/liblog"
)

// Driver is a dlock driver over one ZooKeeper session; [Driver.Capabilities]
// lists what it can do. Make it with [Dial], with [New] over a connection
// the caller owns, or through dlock.Open with a "zk://" URL. It is safe for
// concurrent use.
type Driver struct {
	conn  *zk.Conn
	owned bool // the connection was made by the Driver, so Close closes it
	base  string
	acl   []zk.ACL

	timeout atomic.Int64 // the session timeout, in nanoseconds
	dialed  dialedConn   // the network connection of a Driver from Dial

	closed    atomic.Bool
	closeOnce sync.Once
	closing   chan struct{} // closed by Close
	bg        sync.WaitGroup

	nudge   chan struct{} // a session event happened: wakes the monitor
	jobWake chan struct{} // wakes the janitor

	mu        sync.Mutex
	sid       int64 // the session last seen; 0 before the first, or after an expiry
	connected bool
	changed   chan struct{}       // closed and replaced when connected changes
	leases    map[*lease]struct{} // held; told when the session ends
	jobs      []job

	// lapses holds every held lease's validity deadline (see lease.expire).
	lapses *deadline.Queue[*lease]

	// dirWriteRefused: the server refused this Driver a write of a lock's
	// directory (its ACL lacks WRITE), so creates no longer learn their
	// token from one (see attempt.createNode).
	dirWriteRefused atomic.Bool

	stats stats
}

var _ driver.Driver = (*Driver)(nil)

// stats counts what the tests need to see of the Driver's work.
type stats struct {
	lists   atomic.Int64 // listings of a lock's children by acquisitions
	wakeups atomic.Int64 // watch events that woke a waiting acquisition
}

func newDriver(o options, owned bool) *Driver {
	return &Driver{
		lapses:  deadline.NewQueue((*lease).expire),
		owned:   owned,
		base:    o.base,
		acl:     o.acl,
		closing: make(chan struct{}),
		nudge:   make(chan struct{}, 1),
		jobWake: make(chan struct{}, 1),
		changed: make(chan struct{}),
		leases:  map[*lease]struct{}{},
	}
}

// New returns a Driver over conn, a connection the caller made with
// zk.Connect and keeps owning: Close does not close it. sessionTTL must
// be the session timeout the server granted conn (the session's TTL), or less: zk.Connect asks
// for a timeout, and the server grants it when it lies between its
// minSessionTimeout and maxSessionTimeout (by default 2 and 20 ticks of
// 2 s), and the nearest of those otherwise; the client library does not tell
// which. A timeout larger than the granted one would let a lease be trusted
// after its session may have expired. [Dial] reads the granted timeout from
// the server instead.
//
// All the Driver's locks live in conn's session. The Driver learns of the
// session's changes by polling conn's state, since the caller owns conn's
// events.
func New(conn *zk.Conn, sessionTTL time.Duration, opts ...Option) (*Driver, error) {
	if conn == nil {
		return nil, errors.New("zookeeper: New with a nil connection")
	}
	if sessionTTL <= 0 {
		return nil, fmt.Errorf("zookeeper: New with a session TTL of %v", sessionTTL)
	}
	o := defaultOptions()
	if err := o.apply(opts); err != nil {
		return nil, err
	}
	d := newDriver(o, false)
	d.conn = conn
	d.timeout.Store(int64(sessionTTL))
	d.begin()
	return d, nil
}

// Dial connects to the ensemble at servers ("host:port", the port defaulting
// to 2181), waits until the session is established (bounded by ctx), and
// returns a Driver that owns the connection: Close closes it, and with it the
// session. The session TTL asked for is [DefaultSessionTTL] unless
// [WithSessionTTL] says otherwise; the Driver uses the one the server
// grants.
func Dial(ctx context.Context, servers []string, opts ...Option) (*Driver, error) {
	if len(servers) == 0 {
		return nil, errors.New("zookeeper: Dial with no servers")
	}
	o := defaultOptions()
	if err := o.apply(opts); err != nil {
		return nil, err
	}
	d := newDriver(o, true)
	d.timeout.Store(int64(o.sessionTTL)) // until the server grants one (session.go)
	conn, _, err := zk.Connect(servers, o.sessionTTL,
		zk.WithDialer(d.dialer()),
		zk.WithEventCallback(d.onEvent),
		// dlock reports failures through its own API; the library's
		// lines (every reconnection) go to slog at Debug.
		zk.WithLogger(liblog.Printf("go-zookeeper")),
	)
	if err != nil {
		return nil, fmt.Errorf("zookeeper: %w", err)
	}
	d.conn = conn
	d.begin()
	if _, err := d.waitSession(ctx); err != nil {
		_ = d.Close()
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, fmt.Errorf("zookeeper: no session with %v: %w", servers, ctxErr)
		}
		return nil, err
	}
	return d, nil
}

// begin starts the Driver's goroutines.
func (d *Driver) begin() {
	d.observe()
	d.bg.Add(2)
	go d.monitor()
	go d.janitor()
}

// enter checks that the Driver is open and ctx alive.
func (d *Driver) enter(ctx context.Context) error {
	if d.closed.Load() {
		return driver.ErrClosed
	}
	return ctx.Err()
}

// forget stops tracking a lease that ended.
func (d *Driver) forget(l *lease) {
	d.mu.Lock()
	delete(d.leases, l)
	d.mu.Unlock()
}

// Capabilities reports read-write and reentrant locks, waiting in the
// lock's queue of sequence nodes (Blocking), batched renewal, inspection
// ([Driver.Inspect]) that reports a hold's value with its token (Values:
// the value is in the holder's node), and TTLs from
// one to two session timeouts (as granted when it is called: the core calls
// it once, when a Client is made). A shorter TTL cannot be honoured: a
// holder that crashes keeps its lock until its session expires, a session
// timeout later. A longer one breaks renewal: dlock renews every TTL/3, and
// a lease is valid for one session timeout after its last confirmation.
// Every key the core accepts is accepted: the escaping in "Keys" of the
// package documentation maps any byte string onto a valid node name.
func (d *Driver) Capabilities() driver.Capabilities {
	st := d.SessionTTL()
	return driver.Capabilities{
		Shared:        true,
		Reentrant:     true,
		Blocking:      true,
		MinTTL:        st,
		MaxTTL:        2 * st,
		TTLReason:     fmt.Sprintf("the session TTL (ZooKeeper's session timeout) is %v: a crashed holder keeps its lock that long, so a shorter TTL cannot be honoured, and a lease is valid that long after its last confirmation, so above twice that, leases renewed every TTL/3 would lapse first", st),
		BatchExtender: d,
		Inspector:     d,
		Values:        true,
	}
}

// Acquire queues for the lock. Without req.Block it leaves the queue again
// unless the lock is granted at once: it returns ErrLocked having deleted its
// node; a client cut off from the ensemble waits for its session to come
// back for at most one session timeout (bounded by ctx), then fails with
// ErrDisconnected. With req.Block it waits, watching only the node ahead of
// its own, until the lock is granted or ctx ends; it rides out
// disconnections (re-queueing if its session expired meanwhile). When ctx
// ends it deletes its node and returns ctx's error.
func (d *Driver) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	return d.acquire(ctx, req, req.Block)
}

// Close ends the Driver. Its held locks are lost and reported so: for a
// Driver from [Dial] or dlock.Open, Close closes the session, and ZooKeeper
// deletes its nodes; over a caller's connection, whose session lives on,
// Close deletes them itself (bounded by 2 s), since it can no longer enforce
// their TTL. Waiting Acquire calls return ErrClosed. Calls after the first
// return nil.
func (d *Driver) Close() error {
	first := false
	d.closeOnce.Do(func() { first = true })
	if !first {
		return nil
	}
	d.closed.Store(true)
	d.mu.Lock()
	held := slices.Collect(maps.Keys(d.leases))
	d.mu.Unlock()
	// Holders hear of the loss before anyone else can take their locks.
	for _, l := range held {
		l.lose(ErrSessionClosed)
	}
	if !d.owned {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		for _, l := range held {
			d.enqueue(job{lease: l, sid: l.sid})
		}
		if d.liveSession() != 0 {
			_ = d.sweepUntil(ctx)
		}
		cancel()
	}
	close(d.closing)
	d.bg.Wait()
	if d.owned {
		d.conn.Close()
		// After the session's orderly close: a handshake still waiting
		// for a silent server would keep the library's goroutine until
		// its read deadline.
		d.dialed.close()
	}
	return nil
}

// sweepUntil runs the pending jobs once, before Close stops the janitor.
func (d *Driver) sweepUntil(ctx context.Context) error {
	deadline, _ := ctx.Deadline()
	d.sweep(time.Until(deadline))
	return ctx.Err()
}
