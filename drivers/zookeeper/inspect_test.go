package zookeeper

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

// inspect inspects key on d, or fails t.
func inspect(t *testing.T, d *Driver, key string) driver.Info {
	t.Helper()
	info, err := d.Inspect(ctxFor(t), key)
	if err != nil {
		t.Fatalf("Inspect(%q): %v", key, err)
	}
	return info
}

// valued returns an exclusive request for key with value.
func valued(key, value string) driver.Request {
	r := request(key, driver.Exclusive)
	r.Value = value
	return r
}

// TestInspectValue: a hold's value and token are reported together from the
// grant to the release, the next holder's after it, and nothing once the
// lock is free.
func TestInspectValue(t *testing.T) {
	base, key := testBase(), "value"
	d1, d2 := dialAddr(t, serverAddr(t), base), dialAddr(t, serverAddr(t), base)
	if info := inspect(t, d2, key); info != (driver.Info{}) {
		t.Fatalf("Inspect of a lock never taken = %+v, want free, nobody waiting", info)
	}
	req := valued(key, "node-1 at 10.0.0.1:8080 ∑")
	l := testkit.MustAcquire(t, ctxFor(t), d1, req)
	want := driver.Info{Held: true, Holders: 1, Owner: req.ID, Token: l.Token(), Value: req.Value}
	if info := inspect(t, d2, key); info != want {
		t.Fatalf("Inspect = %+v, want %+v", info, want)
	}
	if err := l.Extend(ctxFor(t), testSession); err != nil {
		t.Fatal(err)
	}
	if info := inspect(t, d2, key); info != want {
		t.Fatalf("Inspect after Extend = %+v, want %+v", info, want)
	}

	// A waiter counts, and gets its own value reported once it holds.
	req2 := valued(key, "node-2")
	type grant struct {
		l   driver.Lease
		err error
	}
	granted := make(chan grant, 1)
	go func() {
		l, err := d2.Acquire(ctxFor(t), block(req2))
		granted <- grant{l, err}
	}()
	waitUntil(t, 20*time.Second, "the waiter queued", func() bool { return inspect(t, d1, key).Waiters == 1 })
	if info := inspect(t, d2, key); info.Owner != req.ID || info.Token != l.Token() || info.Value != req.Value {
		t.Fatalf("Inspect with a waiter = %+v, want the first holder still", info)
	}
	if err := l.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	g := <-granted
	if g.err != nil {
		t.Fatalf("waiter: %v", g.err)
	}
	if g.l.Token() <= l.Token() {
		t.Fatalf("second token %d, want above %d", g.l.Token(), l.Token())
	}
	want = driver.Info{Held: true, Holders: 1, Owner: req2.ID, Token: g.l.Token(), Value: req2.Value}
	if info := inspect(t, d1, key); info != want {
		t.Fatalf("Inspect after the handover = %+v, want %+v", info, want)
	}
	if err := g.l.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	if info := inspect(t, d1, key); info != (driver.Info{}) {
		t.Fatalf("Inspect after Release = %+v, want free", info)
	}
}

// TestInspectValueExpires: a hold that ends without a release (its lease
// lapses unrenewed, or its session ends) takes its value with it.
func TestInspectValueExpires(t *testing.T) {
	base, key := testBase(), "expiry"
	d1, d2 := dialAddr(t, serverAddr(t), base), dialAddr(t, serverAddr(t), base)
	l := testkit.MustAcquire(t, ctxFor(t), d1, valued(key, "lapses"))
	if info := inspect(t, d2, key); info.Value != "lapses" || info.Token != l.Token() {
		t.Fatalf("Inspect = %+v", info)
	}
	// Unrenewed, the lease lapses after a session TTL and the Driver
	// deletes its node.
	waitUntil(t, 20*time.Second, "the unrenewed lock freed", func() bool { return !inspect(t, d2, key).Held })

	holder := dialAddr(t, serverAddr(t), base)
	l = testkit.MustAcquire(t, ctxFor(t), holder, valued(key, "closes"))
	if info := inspect(t, d2, key); info.Value != "closes" || info.Token != l.Token() {
		t.Fatalf("Inspect = %+v", info)
	}
	_ = holder.Close() // ends the session: ZooKeeper deletes its nodes
	if info := inspect(t, d2, key); info != (driver.Info{}) {
		t.Fatalf("Inspect after the holder's session closed = %+v, want free", info)
	}
}

// TestInspectSharedAndReentrant: readers report the oldest one's token and
// value; a reentrant hold, its owner and the value of the request that
// created its node, however entries come and go; without a value, the
// node keeps its earlier form and reports none.
func TestInspectSharedAndReentrant(t *testing.T) {
	base := testBase()
	d1, d2 := dialAddr(t, serverAddr(t), base), dialAddr(t, serverAddr(t), base)

	r1, r2 := request("shared", driver.Shared), request("shared", driver.Shared)
	r1.Value, r2.Value = "reader-1", "reader-2"
	l1 := testkit.MustAcquire(t, ctxFor(t), d1, r1)
	l2 := testkit.MustAcquire(t, ctxFor(t), d2, r2)
	want := driver.Info{Held: true, Mode: driver.Shared, Holders: 2, Token: l1.Token(), Value: "reader-1"}
	if info := inspect(t, d2, "shared"); info != want {
		t.Fatalf("Inspect of two readers = %+v, want %+v", info, want)
	}
	_ = l1.Release(ctxFor(t))
	want = driver.Info{Held: true, Mode: driver.Shared, Holders: 1, Owner: r2.ID, Token: l2.Token(), Value: "reader-2"}
	if info := inspect(t, d1, "shared"); info != want {
		t.Fatalf("Inspect of one reader = %+v, want %+v", info, want)
	}
	_ = l2.Release(ctxFor(t))

	e1, e2 := valued("reentrant", "first"), valued("reentrant", "second")
	e1.Owner, e2.Owner = "owner-o", "owner-o"
	h1 := testkit.MustAcquire(t, ctxFor(t), d1, e1)
	h2 := testkit.MustAcquire(t, ctxFor(t), d2, e2)
	if h2.Token() != h1.Token() {
		t.Fatalf("the second entry did not join: tokens %d and %d", h1.Token(), h2.Token())
	}
	want = driver.Info{Held: true, Holders: 1, Owner: "owner-o", Token: h1.Token(), Value: "first"}
	if info := inspect(t, d2, "reentrant"); info != want {
		t.Fatalf("Inspect of a reentrant hold = %+v, want %+v", info, want)
	}
	if err := h1.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	if info := inspect(t, d2, "reentrant"); info != want {
		t.Fatalf("Inspect after the first entry left = %+v, want %+v", info, want)
	}
	_ = h2.Release(ctxFor(t))

	plain := request("reentrant", driver.Exclusive)
	plain.Owner = "owner-p"
	h := testkit.MustAcquire(t, ctxFor(t), d1, plain)
	defer h.Release(context.Background())
	want = driver.Info{Held: true, Holders: 1, Owner: "owner-p", Token: h.Token()}
	if info := inspect(t, d2, "reentrant"); info != want {
		t.Fatalf("Inspect of a reentrant hold without a value = %+v, want %+v", info, want)
	}
}

// TestElection runs dlock's leader election over two Drivers
// (testkit.ElectionRoundTrip).
func TestElection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	base := testBase()
	ca := testkit.Client(t, dialAddr(t, serverAddr(t), base), dlock.WithTTL(testSession))
	cb := testkit.Client(t, dialAddr(t, serverAddr(t), base), dlock.WithTTL(testSession))
	testkit.ElectionRoundTrip(t, ctx, ca, cb, "election")
}

// TestInspectHolderGoneBetweenReads: a listing whose holder left before its
// node was read yields nothing of it (nor of the node that took its place),
// and Inspect then reports the new holder from a listing of its own.
func TestInspectHolderGoneBetweenReads(t *testing.T) {
	base, key := testBase(), "gone"
	conn := rawConn(t)
	d1, d2 := dialAddr(t, serverAddr(t), base), dialAddr(t, serverAddr(t), base)
	first := testkit.MustAcquire(t, ctxFor(t), d1, valued(key, "first"))
	dir := d2.dirOf(key)
	names, _, err := conn.Children(dir)
	if err != nil {
		t.Fatal(err)
	}
	stale := parseListing(names)
	if err := first.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	req := valued(key, "second")
	second := testkit.MustAcquire(t, ctxFor(t), d1, req)
	defer second.Release(context.Background())

	info, gone, err := d2.readHolder(ctxFor(t), dir, stale)
	if err != nil || !gone || info != (driver.Info{}) {
		t.Fatalf("readHolder of a listing whose holder left = %+v, gone %v, %v; want gone and nothing", info, gone, err)
	}
	want := driver.Info{Held: true, Holders: 1, Owner: req.ID, Token: second.Token(), Value: "second"}
	if info := inspect(t, d2, key); info != want {
		t.Fatalf("Inspect = %+v, want %+v", info, want)
	}
}
