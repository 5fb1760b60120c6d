package zookeeper

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

// TestLostCreateReply: the server applies a create whose reply the client
// never gets (pattern 7 of the reference's broken locks). The Driver finds
// its node by the request ID after reconnecting: it neither waits on its own
// node (which would be the node ahead of a second one) nor leaves it behind.
func TestLostCreateReply(t *testing.T) {
	base, key := testBase(), "lost-reply"
	conn := rawConn(t)
	p := newProxy(t, serverAddr(t))
	d := dialAddr(t, p.Addr(), base)
	// Another client holds the lock, so that the lock's node exists (a
	// create into a missing directory fails, and its reply would be lost
	// for nothing) and the recovering Acquire has to wait its turn.
	holder := dialAddr(t, serverAddr(t), base)
	hl, err := holder.Acquire(ctxFor(t), request(key, driver.Exclusive))
	if err != nil {
		t.Fatal(err)
	}
	swallowed := p.swallowNextCreate()
	req := request(key, driver.Exclusive)
	type result struct {
		l   driver.Lease
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := d.Acquire(ctxFor(t), block(req))
		got <- result{l, err}
	}()
	awaitSwallowed(t, swallowed)
	waitUntil(t, 10*time.Second, "the create applied on the server", func() bool {
		return len(children(t, conn, base, key)) == 2
	})
	p.cut()
	if err := hl.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-got:
	case <-time.After(30 * time.Second):
		t.Fatalf("Acquire did not return after its create's reply was lost: waiting on its own node? nodes: %v", children(t, conn, base, key))
	}
	if r.err != nil {
		t.Fatalf("Acquire: %v", r.err)
	}
	names := children(t, conn, base, key)
	if len(names) != 1 || !strings.Contains(names[0], req.ID) {
		t.Fatalf("nodes after the recovered create: %v, want just the request's own", names)
	}
	if err := r.l.Release(ctxFor(t)); err != nil {
		t.Fatalf("Release: %v", err)
	}

	// A try (no Block) does not wait for the outcome: it fails, and the Driver
	// removes the node in the background once connected again.
	if hl, err = holder.Acquire(ctxFor(t), request(key, driver.Exclusive)); err != nil {
		t.Fatal(err)
	}
	swallowed = p.swallowNextCreate()
	failed := make(chan error, 1)
	go func() {
		_, err := d.Acquire(ctxFor(t), request(key, driver.Exclusive))
		failed <- err
	}()
	awaitSwallowed(t, swallowed)
	waitUntil(t, 10*time.Second, "the create applied on the server", func() bool {
		return len(children(t, conn, base, key)) == 2
	})
	p.cut()
	if err := <-failed; err == nil || errors.Is(err, driver.ErrLocked) {
		t.Fatalf("Acquire whose create's reply was lost: got %v, want a connection error", err)
	}
	waitUntil(t, 3*testSession, "the orphan node removed", func() bool {
		return len(children(t, conn, base, key)) == 1
	})
	if err := hl.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
}

// TestCancelledAcquire: a waiting Acquire whose context ends deletes its node
// before it returns ctx's error.
func TestCancelledAcquire(t *testing.T) {
	base, key := testBase(), "cancel"
	conn := rawConn(t)
	holder, waiter := dialAddr(t, serverAddr(t), base), dialAddr(t, serverAddr(t), base)
	l, err := holder.Acquire(ctxFor(t), request(key, driver.Exclusive))
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []driver.Mode{driver.Exclusive, driver.Shared} {
		ctx, cancel := context.WithCancel(ctxFor(t))
		done := make(chan error, 1)
		go func() {
			_, err := waiter.Acquire(ctx, block(request(key, mode)))
			done <- err
		}()
		waitUntil(t, 10*time.Second, "the waiter queued", func() bool {
			return len(children(t, conn, base, key)) == 2
		})
		cancel()
		if err := <-done; err != context.Canceled {
			t.Fatalf("cancelled Acquire: got %v, want exactly context.Canceled", err)
		}
		if names := children(t, conn, base, key); len(names) != 1 {
			t.Fatalf("%v waiter's nodes after it was cancelled: %v, want only the holder's", mode, names)
		}
	}
	if err := l.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
}

// TestDisconnectBlip: a connection cut shorter than the session timeout makes
// the lease uncertain while it lasts, and changes nothing else.
func TestDisconnectBlip(t *testing.T) {
	// The blip is short against the session and the TTL, 1/20 of them: the
	// Driver must reconnect and renew within the rest of the lease's
	// validity. With testSession (2 s, the last renewal up to a third of it
	// before the cut) well under a second was left after the blip, too
	// little on a loaded machine running -race.
	const session = 5 * testSession
	const blip = session / 20
	base, key := testBase(), "blip"
	p := newProxy(t, serverAddr(t))
	c := newClientTTL(t, dialSession(t, p.Addr(), base, session), session)
	other := newClientTTL(t, dialSession(t, serverAddr(t), base, session), session)
	m := mutex(t, c, key)
	l := testkit.Lock(t, ctxFor(t), m)
	released, err := mutex(t, c, key+"-released").Lock(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	p.refuse(true)
	p.cut()
	waitUntil(t, session, "Uncertain reporting the cut", func() bool { return l.Uncertain() != nil })
	if err := l.Uncertain(); !errors.Is(err, ErrDisconnected) {
		t.Errorf("Uncertain while cut off: %v, want ErrDisconnected", err)
	}
	// An Unlock while cut off does not wait for the network: the Driver
	// deletes the node once it is back.
	if err := released.Unlock(ctxFor(t)); !errors.Is(err, ErrDisconnected) {
		t.Errorf("Unlock while cut off: %v, want ErrDisconnected", err)
	}
	time.Sleep(blip) // the length of the fault
	p.refuse(false)
	waitUntil(t, 2*session, "the connection back", func() bool { return l.Uncertain() == nil })
	if err := l.Extend(ctxFor(t)); err != nil {
		t.Fatalf("Extend after a blip: %v", err)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("lease after a blip: %v", err)
	}
	if _, err := mutex(t, other, key).TryLock(ctxFor(t)); !errors.Is(err, dlock.ErrLocked) {
		t.Fatalf("another client's TryLock after the blip: %v, want ErrLocked", err)
	}
	if err := l.Unlock(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	conn := rawConn(t)
	waitUntil(t, 2*session, "the node unlocked while cut off removed", func() bool {
		return len(children(t, conn, base, key+"-released")) == 0
	})
}

// TestDisconnectBeyondSession: a holder cut off for longer than the session
// timeout is told it lost the lock before anyone else can take it, and its
// Driver goes on with a new session once the network is back.
func TestDisconnectBeyondSession(t *testing.T) {
	base, key := testBase(), "cut-off"
	p := newProxy(t, serverAddr(t))
	d := dialAddr(t, p.Addr(), base)
	c := newClient(t, d)
	other := newClient(t, dialAddr(t, serverAddr(t), base))
	l, err := mutex(t, c, key).Lock(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	oldSession := d.conn.SessionID()
	p.refuse(true)
	p.cut()
	deadline := l.Deadline()
	lb, err := mutex(t, other, key).Lock(ctxFor(t))
	if err != nil {
		t.Fatalf("another client's Lock while the holder is cut off: %v", err)
	}
	taken := time.Now()
	select {
	case <-l.Done():
	default:
		t.Fatalf("the lock was taken %v before the cut-off holder's deadline, and the holder was not told", deadline.Sub(taken))
	}
	if err := l.Err(); !errors.Is(err, dlock.ErrLockLost) {
		t.Errorf("Err of the cut-off holder: %v, want ErrLockLost", err)
	}
	p.refuse(false)
	waitUntil(t, 4*testSession, "a new session", func() bool {
		sid := d.liveSession()
		return sid != 0 && sid != oldSession
	})
	if err := lb.Unlock(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	// The Driver works on with its new session.
	l2, err := mutex(t, c, key).Lock(ctxFor(t))
	if err != nil {
		t.Fatalf("Lock on the new session: %v", err)
	}
	if err := l2.Unlock(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
}

func newClient(tb testing.TB, d driver.Driver) *dlock.Client {
	tb.Helper()
	return newClientTTL(tb, d, testSession)
}

// newClientTTL is newClient with locks of the given TTL.
func newClientTTL(tb testing.TB, d driver.Driver, ttl time.Duration) *dlock.Client {
	tb.Helper()
	c := testkit.Client(tb, d, dlock.WithTTL(ttl))
	return c
}

func mutex(tb testing.TB, c *dlock.Client, key string, opts ...dlock.Option) dlock.Mutex {
	tb.Helper()
	m := testkit.Mutex(tb, c, key, opts...)
	return m
}

// awaitSwallowed waits for the proxy to swallow the reply it was armed for,
// failing the test (instead of hanging it) if no create ever passes.
func awaitSwallowed(t *testing.T, swallowed <-chan struct{}) {
	t.Helper()
	select {
	case <-swallowed:
	case <-time.After(30 * time.Second):
		t.Fatal("the proxy saw no create (or multi) whose reply it could swallow")
	}
}
