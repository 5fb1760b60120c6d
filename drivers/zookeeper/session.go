package zookeeper

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/driver"
)

// The session. One *zk.Conn, so one ZooKeeper session, serves every lock of a
// Driver. The Driver watches it in one goroutine (the monitor): when the
// session it knew ends (expiry, seen by the client library only once it
// reconnects), every lease resting on it is reported lost; when the client is
// connected again, the janitor gets to work.
//
// The client library does not expose the session timeout the server
// granted, only the one asked for. A Driver that made its own connection
// ([Dial], dlock.Open) reads the granted timeout from the server's connect
// response, through its dialer; one over a caller's connection ([New]) is
// told it.

// sniffConn passes a connection through, reading the session timeout from
// the first bytes the server sends: the connect response, which is a 4-byte
// length, then protocolVersion (int32), timeOut (int32, milliseconds),
// sessionId (int64), ... A response with session ID 0 refuses an expired
// session and grants nothing.
//
// It also bounds the wait for that response. The client library gives the
// connect response ten receive timeouts (about 6.7 session timeouts) to
// arrive, and none at all to its second half; a server or proxy that
// accepts a connection and stays silent (a port proxy whose server is still
// starting: seen in the tests after a ZooKeeper restart, 13 s of a 2 s
// session's client stuck) would hold the client that long before it tried
// again. Until the response is in, every read deadline is capped at
// handshakeBy: a session whose connect response takes longer than its
// timeout is of no use anyway.
type sniffConn struct {
	net.Conn
	granted     func(time.Duration)
	handshakeBy time.Time

	mu   sync.Mutex
	head []byte // the first bytes read, until 20 are in
	done bool
}

// SetReadDeadline sets t, capped at handshakeBy until the connect response
// is in (a zero t, no deadline, included).
func (c *sniffConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	if !c.done && (t.IsZero() || t.After(c.handshakeBy)) {
		t = c.handshakeBy
	}
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

const connectHeadLen = 20

func (c *sniffConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.sniff(p[:n])
	}
	return n, err
}

func (c *sniffConn) sniff(b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return
	}
	c.head = append(c.head, b[:min(len(b), connectHeadLen-len(c.head))]...)
	if len(c.head) < connectHeadLen {
		return
	}
	c.done = true
	timeout := int32(binary.BigEndian.Uint32(c.head[8:12]))
	session := int64(binary.BigEndian.Uint64(c.head[12:20]))
	if session != 0 && timeout > 0 {
		c.granted(time.Duration(timeout) * time.Millisecond)
	}
}

// dialer returns a zk.Dialer that records the granted session timeout and
// bounds the handshake by the session timeout (at least handshakeMin).
func (d *Driver) dialer() zk.Dialer {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		c, err := net.DialTimeout(network, address, timeout)
		if err != nil {
			return nil, err
		}
		if !d.dialed.set(c) {
			return nil, net.ErrClosed
		}
		by := time.Now().Add(max(d.SessionTTL(), handshakeMin))
		if err := c.SetReadDeadline(by); err != nil {
			_ = c.Close()
			return nil, err
		}
		return &sniffConn{Conn: c, handshakeBy: by, granted: func(t time.Duration) { d.timeout.Store(int64(t)) }}, nil
	}
}

// dialedConn is the network connection a Driver's dialer made last. The
// client library's Close neither closes it nor stops a reconnection: a
// handshake waiting for a server that accepted the connection and stays
// silent holds the library's goroutine until its read deadline, past a
// failed Dial or a Close. The Driver's Close closes the connection, and
// makes the dialer refuse any other.
type dialedConn struct {
	mu     sync.Mutex
	conn   net.Conn
	closed bool
}

// set records c as the current connection, or closes it and returns false
// once close was called.
func (dc *dialedConn) set(c net.Conn) bool {
	dc.mu.Lock()
	defer dc.mu.Unlock()
	if dc.closed {
		_ = c.Close()
		return false
	}
	dc.conn = c
	return true
}

// close closes the current connection and refuses later ones.
func (dc *dialedConn) close() {
	dc.mu.Lock()
	defer dc.mu.Unlock()
	dc.closed = true
	if dc.conn != nil {
		_ = dc.conn.Close()
	}
}

// handshakeMin is the shortest time a connect response is given, whatever
// the session timeout: a loaded server answers in milliseconds, not in one.
const handshakeMin = time.Second

// onEvent is the connection's event callback: it must not block, so it only
// wakes the monitor.
func (d *Driver) onEvent(ev zk.Event) {
	if ev.Type == zk.EventSession {
		select {
		case d.nudge <- struct{}{}:
		default:
		}
	}
}

// SessionTTL returns the session TTL (ZooKeeper's session timeout) the
// Driver works with: the one the server granted (for a Driver from [Dial]
// or dlock.Open) or the one [New] was told. Leases are valid for at most this long after their last
// confirmation.
func (d *Driver) SessionTTL() time.Duration { return time.Duration(d.timeout.Load()) }

// liveSession returns the ID of the session while the client is connected
// with it, and 0 otherwise.
func (d *Driver) liveSession() int64 {
	if d.conn.State() != zk.StateHasSession {
		return 0
	}
	return d.conn.SessionID()
}

// pollInterval is how often the monitor looks at the connection's state
// without being woken: a safety net for a Driver that gets session events,
// the only way to learn of changes for one over a caller's connection.
func (d *Driver) pollInterval() time.Duration {
	if d.owned {
		return 100 * time.Millisecond
	}
	return min(max(d.SessionTTL()/20, 5*time.Millisecond), 100*time.Millisecond)
}

// monitor runs until Close, observing the session on every event and poll.
func (d *Driver) monitor() {
	defer d.bg.Done()
	ticker := time.NewTicker(d.pollInterval())
	defer ticker.Stop()
	for {
		select {
		case <-d.closing:
			return
		case <-d.nudge:
		case <-ticker.C:
		}
		d.observe()
	}
}

// observe compares the connection's state with what the Driver last saw,
// and reports the leases of a session that ended as lost. The monitor calls
// it on every event and poll; others call it when they need the Driver's
// view to be current.
func (d *Driver) observe() {
	state, sid := d.conn.State(), d.conn.SessionID()
	var lost []*lease
	d.mu.Lock()
	ended := int64(0)
	if d.sid != 0 && (sid != 0 && sid != d.sid || state == zk.StateExpired) {
		ended = d.sid
	}
	if sid != 0 {
		d.sid = sid
	} else if ended != 0 {
		d.sid = 0
	}
	if ended != 0 {
		for l := range d.leases {
			if l.sid == ended {
				lost = append(lost, l)
			}
		}
	}
	connected := state == zk.StateHasSession
	if connected != d.connected {
		d.connected = connected
		close(d.changed)
		d.changed = make(chan struct{})
	}
	haveJobs := len(d.jobs) > 0
	d.mu.Unlock()
	for _, l := range lost {
		l.lose(ErrSessionExpired)
	}
	if connected && haveJobs {
		d.wakeJanitor()
	}
}

// waitSession waits until the client is connected with a session and returns
// its ID, or ctx's error, or ErrClosed.
func (d *Driver) waitSession(ctx context.Context) (int64, error) {
	for {
		if sid := d.liveSession(); sid != 0 {
			return sid, nil
		}
		d.mu.Lock()
		changed := d.changed
		d.mu.Unlock()
		// The monitor may learn of the session a poll interval late.
		timer := time.NewTimer(d.pollInterval())
		select {
		case <-ctx.Done():
			timer.Stop()
			return 0, ctx.Err()
		case <-d.closing:
			timer.Stop()
			return 0, driver.ErrClosed
		case <-changed:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// call runs op, a blocking request of the client library, and returns its
// error, or ctx's error when ctx ends first, or ErrClosed when the Driver is
// closed first. The client library takes no context, and requests queued
// while it is disconnected wait for the next connection: an abandoned op
// runs on in the background, so op must only write variables that the caller
// reads after a nil or op error from call.
func (d *Driver) call(ctx context.Context, op func() error) error {
	return d.await(ctx, d.start(op))
}

// start runs op in the background and returns the channel of its result.
func (d *Driver) start(op func() error) <-chan error {
	done := make(chan error, 1)
	go func() { done <- op() }()
	return done
}
