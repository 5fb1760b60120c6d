package zookeeper

import (
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/driver"
)

// ZooKeeper request opcodes, as the proxy counts them.
const (
	opCreate       = 1
	opDelete       = 2
	opExists       = 3
	opGetData      = 4
	opGetChildren2 = 12
	opMulti        = 14
)

// TestRequestsPerHandoff counts, at two proxies, the requests of a holder
// and a waiter (pings left out) and pins them to what the lock recipe needs:
//
//   - the waiter's queueing: its create (a multi, whose reply gives the
//     fencing token: see attempt.createNode); a listing of the queue; and
//     the read that sets a watch on the node ahead of it;
//   - the handoff, from the holder's release to the waiter's grant: the
//     holder's delete and, once the watch fires, one listing by the waiter,
//     which confirms that it now heads the queue (a waiter ahead of it may
//     have given up rather than been granted) and that its node and session
//     are still there, and which the server counts as hearing from the
//     session, so the lease's validity can run from its sending;
//   - the waiter's release: its delete.
func TestRequestsPerHandoff(t *testing.T) {
	// Long sessions: a session lost to a stalled machine would add requests
	// (the reconnection's) that this test is not about.
	const session = 30 * time.Second
	req := func() driver.Request {
		r := request("handoff", driver.Exclusive)
		r.TTL = session
		return r
	}
	base := testBase()
	hp, wp := newProxy(t, serverAddr(t)), newProxy(t, serverAddr(t))
	holder := dialSession(t, hp.Addr(), base, session)
	waiter := dialSession(t, wp.Addr(), base, session)
	held, err := holder.Acquire(ctxFor(t), req())
	if err != nil {
		t.Fatal(err)
	}

	before := wp.requests()
	type result struct {
		l   driver.Lease
		err error
	}
	done := make(chan result, 1)
	go func() {
		l, err := waiter.Acquire(ctxFor(t), block(req()))
		done <- result{l, err}
	}()
	// The waiter has queued once it asked to watch its predecessor.
	waitUntil(t, 30*time.Second, "the waiter's watch", func() bool { return wp.requests()[opGetData] > before[opGetData] })
	queueing := diff(before, wp.requests())
	want(t, "the waiter's queueing", queueing, map[int32]int{opMulti: 1, opGetChildren2: 1, opGetData: 1})

	holderBefore, waiterBefore := hp.requests(), wp.requests()
	if err := held.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the release did not hand the lock over")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	want(t, "the holder's release", diff(holderBefore, hp.requests()), map[int32]int{opDelete: 1})
	checkToken(t, base, "handoff", r.l)
	want(t, "the waiter's wake-up", diff(waiterBefore, wp.requests()), map[int32]int{opGetChildren2: 1})

	releaseBefore := wp.requests()
	if err := r.l.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	want(t, "the waiter's release", diff(releaseBefore, wp.requests()), map[int32]int{opDelete: 1})
	t.Logf("requests per critical section of a waiter: %d (pings left out)", total(diff(before, wp.requests())))
}

// diff returns the requests in after that were not in before, by opcode.
func diff(before, after map[int32]int) map[int32]int {
	d := map[int32]int{}
	for op, n := range after {
		if n -= before[op]; n != 0 {
			d[op] = n
		}
	}
	return d
}

func total(m map[int32]int) int {
	n := 0
	for _, c := range m {
		n += c
	}
	return n
}

func want(t *testing.T, what string, got, wanted map[int32]int) {
	t.Helper()
	if !maps.Equal(got, wanted) {
		t.Errorf("%s: requests by opcode %v, want %v", what, got, wanted)
	}
}

// checkToken checks that l's token is the creating zxid of the one queue node
// of key under base, read through a connection of its own.
func checkToken(t *testing.T, base, key string, l driver.Lease) {
	t.Helper()
	conn := rawConn(t)
	names := children(t, conn, base, key)
	if len(names) != 1 {
		t.Fatalf("queue nodes %v, want the holder's alone", names)
	}
	_, stat, err := conn.Get("/dlock-test" + base + "/" + escapeKey(key) + "/" + names[0])
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Token(); got != uint64(stat.Czxid) {
		t.Errorf("token %d, want the node's Czxid %d", got, stat.Czxid)
	}
}

// TestTokenWithoutDirWrite: a Driver that may create in a lock's directory
// but not write it (its ACL leaves out WRITE) cannot learn its token from a
// multi that writes the directory: it creates alone, reads the token with
// its first listing, and stops trying the multi.
func TestTokenWithoutDirWrite(t *testing.T) {
	base, key := testBase(), "no-write"
	conn := rawConn(t)
	acl := zk.WorldACL(zk.PermRead | zk.PermCreate | zk.PermDelete)
	dir := "/dlock-test" + base + "/" + escapeKey(key)
	for _, p := range []string{"/dlock-test", "/dlock-test" + base, dir} {
		a := zk.WorldACL(zk.PermAll)
		if p == dir {
			a = acl
		}
		if _, err := conn.Create(p, nil, zk.FlagPersistent, a); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
	p := newProxy(t, serverAddr(t))
	d := dialAddr(t, p.Addr(), base)
	for i := range 2 {
		before := p.requests()
		l, err := d.Acquire(ctxFor(t), request(key, driver.Exclusive))
		if err != nil {
			t.Fatal(err)
		}
		checkToken(t, base, key, l)
		wanted := map[int32]int{opCreate: 1, opGetChildren2: 1, opExists: 1}
		if i == 0 {
			wanted[opMulti] = 1 // refused, once
		}
		want(t, "an acquisition", diff(before, p.requests()), wanted)
		if err := l.Release(ctxFor(t)); err != nil {
			t.Fatal(err)
		}
	}
}
