package zookeeper

import (
	"context"
	"errors"
	"testing"

	"github.com/dlock-go/dlock/driver"
)

func ownerRequest(key, owner string, mode driver.Mode) driver.Request {
	r := request(key, mode)
	r.Owner = owner
	return r
}

// TestReentryOutlivesFirstEntry: a hold re-entered from another client stays
// held when the first entry (whose node carries the hold) is released, and
// is free once the last entry goes.
func TestReentryOutlivesFirstEntry(t *testing.T) {
	base, key := testBase(), "reentry"
	conn := rawConn(t)
	da, db, dc := dialAddr(t, serverAddr(t), base), dialAddr(t, serverAddr(t), base), dialAddr(t, serverAddr(t), base)
	for _, mode := range []driver.Mode{driver.Exclusive, driver.Shared} {
		la, err := da.Acquire(ctxFor(t), ownerRequest(key, "o", mode))
		if err != nil {
			t.Fatal(err)
		}
		lb, err := db.Acquire(ctxFor(t), ownerRequest(key, "o", mode))
		if err != nil {
			t.Fatalf("%v re-entry from another client: %v", mode, err)
		}
		if la.Token() != lb.Token() {
			t.Errorf("re-entry token %d, want the first entry's %d", lb.Token(), la.Token())
		}
		if err := la.Release(ctxFor(t)); err != nil {
			t.Fatal(err)
		}
		if _, err := dc.Acquire(ctxFor(t), request(key, driver.Exclusive)); !errors.Is(err, driver.ErrLocked) {
			t.Fatalf("%v: writer after the first entry left, the second still in: got %v, want ErrLocked", mode, err)
		}
		if err := lb.Extend(ctxFor(t), testSession); err != nil {
			t.Fatalf("%v: Extend of the remaining entry: %v", mode, err)
		}
		if err := lb.Release(ctxFor(t)); err != nil {
			t.Fatal(err)
		}
		if names := children(t, conn, base, key); len(names) != 0 {
			t.Fatalf("%v: nodes after every entry left: %v", mode, names)
		}
	}
}

// TestReentryDeadEntry: an entry whose client died (its session ended) does
// not keep the lock: the next release drops it.
func TestReentryDeadEntry(t *testing.T) {
	base, key := testBase(), "dead-entry"
	conn := rawConn(t)
	da, db, dc := dialAddr(t, serverAddr(t), base), dialAddr(t, serverAddr(t), base), dialAddr(t, serverAddr(t), base)
	la, err := da.Acquire(ctxFor(t), ownerRequest(key, "o", driver.Exclusive))
	if err != nil {
		t.Fatal(err)
	}
	lb, err := db.Acquire(ctxFor(t), ownerRequest(key, "o", driver.Exclusive))
	if err != nil {
		t.Fatal(err)
	}
	lost := lostContext(lb)
	_ = db.Close() // the second client dies: its entry node goes with its session
	select {
	case <-lost.Done():
	default:
		t.Error("the closed client's entry was not reported lost")
	}
	if err := la.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	lc, err := dc.Acquire(ctxFor(t), request(key, driver.Exclusive))
	if err != nil {
		t.Fatalf("Acquire after the only live entry left: %v (the dead entry kept the lock?)", err)
	}
	if err := lc.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	if names := children(t, conn, base, key); len(names) != 0 {
		t.Fatalf("nodes left: %v", names)
	}
}

// TestReentryAnchorDies: when the client whose node carries a reentrant hold
// dies, every entry of the hold is lost, and others may take the lock.
func TestReentryAnchorDies(t *testing.T) {
	base, key := testBase(), "anchor-dies"
	da, db, dc := dialAddr(t, serverAddr(t), base), dialAddr(t, serverAddr(t), base), dialAddr(t, serverAddr(t), base)
	if _, err := da.Acquire(ctxFor(t), ownerRequest(key, "o", driver.Exclusive)); err != nil {
		t.Fatal(err)
	}
	lb, err := db.Acquire(ctxFor(t), ownerRequest(key, "o", driver.Exclusive))
	if err != nil {
		t.Fatal(err)
	}
	_ = da.Close()
	if err := lb.Extend(ctxFor(t), testSession); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("Extend of an entry whose anchor died: got %v, want ErrNotHeld", err)
	}
	lc, err := dc.Acquire(ctxFor(t), request(key, driver.Exclusive))
	if err != nil {
		t.Fatalf("Acquire after the hold's anchor died: %v", err)
	}
	_ = lc.Release(ctxFor(t))
}

// TestCallerConnClose: Close of a Driver over a caller's connection leaves
// the connection open, and deletes the nodes of the locks it still held.
func TestCallerConnClose(t *testing.T) {
	base, key := testBase(), "caller-conn"
	conn := rawConn(t)
	d, err := New(conn, testSession, WithBasePath("/dlock-test"+base))
	if err != nil {
		t.Fatal(err)
	}
	l, err := d.Acquire(ctxFor(t), request(key, driver.Exclusive))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := context.Cause(lostContext(l)); !errors.Is(err, ErrSessionClosed) {
		t.Errorf("lease after Close: %v, want ErrSessionClosed", err)
	}
	if names := children(t, conn, base, key); len(names) != 0 {
		t.Errorf("nodes after Close: %v, want none", names)
	}
	if _, err := d.Acquire(ctxFor(t), request(key, driver.Exclusive)); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("Acquire after Close: %v, want ErrClosed", err)
	}
}
