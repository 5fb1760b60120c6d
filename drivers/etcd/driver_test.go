package etcd

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/conformance/containerfaults"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

// slack bounds how late an expected event may be on a loaded machine.
const slack = 2 * time.Second

// reqFor returns a request for key with the tests' TTL.
func reqFor(key string) driver.Request { return testkit.Request(key, testTTL) }

func mustTry(t *testing.T, d *Driver, req driver.Request) driver.Lease {
	t.Helper()
	l, err := d.Acquire(ctxFor(t), req)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", req.Key, err)
	}
	return l
}

// entries returns every etcd key the lock key has, oldest first.
func entries(t *testing.T, cli *clientv3.Client, key string) []*mvccpb.KeyValue {
	t.Helper()
	resp, err := cli.Get(ctxFor(t), namesOf(DefaultKeyPrefix, key).dir,
		clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		t.Fatal(err)
	}
	return resp.Kvs
}

// revision returns the cluster's current revision.
func revision(t *testing.T, cli *clientv3.Client) int64 {
	t.Helper()
	resp, err := cli.Get(ctxFor(t), "dlock-test-revision")
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// expectHeld checks through d that key is held by someone else.
func expectHeld(t *testing.T, d *Driver, key, why string) {
	t.Helper()
	l, err := d.Acquire(ctxFor(t), reqFor(key))
	if err == nil {
		_ = l.Release(ctxFor(t))
		t.Fatalf("Acquire(%q) succeeded, want ErrLocked: %s", key, why)
	}
	if !errors.Is(err, driver.ErrLocked) {
		t.Fatalf("Acquire(%q): %v, want ErrLocked: %s", key, err, why)
	}
}

// lostContext returns a context cancelled when l reports its loss, with the
// reason as its cause, as the core listens (Lease.OnLoss): at once
// when l was lost already.
func lostContext(l driver.Lease) context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	l.OnLoss(func(reason error) { cancel(reason) })
	return ctx
}

// waitDone waits up to d for ctx to end.
func waitDone(t *testing.T, ctx context.Context, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(d):
		t.Fatalf("%s did not happen within %v", what, d)
	}
}

func TestRefusedTryWritesNothing(t *testing.T) {
	cli := newCli(t)
	d1, d2 := newTestDriver(t, cli), newTestDriver(t, newCli(t))
	key := testkit.Key(t)
	l := mustTry(t, d1, reqFor(key))
	if l.Token() == 0 || l.Validity() <= 0 || l.Validity() > testTTL {
		t.Fatalf("lease: token %d, validity %v; want a token and a validity in (0, %v]", l.Token(), l.Validity(), testTTL)
	}
	before := revision(t, cli)
	for _, mode := range []driver.Mode{driver.Exclusive, driver.Shared} {
		req := reqFor(key)
		req.Mode = mode
		if _, err := d2.Acquire(ctxFor(t), req); !errors.Is(err, driver.ErrLocked) {
			t.Fatalf("%s Acquire of a held lock: %v, want ErrLocked", mode, err)
		}
	}
	if after := revision(t, cli); after != before {
		t.Errorf("refused Acquires moved the revision from %d to %d: they wrote something", before, after)
	}
	if n := len(entries(t, cli, key)); n != 1 {
		t.Errorf("%d etcd keys for the lock, want the holder's only", n)
	}
	if err := l.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	if n := len(entries(t, cli, key)); n != 0 {
		t.Errorf("%d etcd keys after the release, want none", n)
	}
}

// A waiter whose session lease ends while it waits must stop with the loss
// instead of waiting for a queue entry that is gone (etcd issue #19597, where
// concurrency.Mutex's Lock keeps waiting and can return "success").
func TestWaiterStopsWhenSessionRevoked(t *testing.T) {
	cli := newCli(t)
	holder, waiter := newTestDriver(t, cli), newTestDriver(t, newCli(t))
	key := testkit.Key(t)
	l := mustTry(t, holder, reqFor(key))
	defer l.Release(context.Background())

	errc := make(chan error, 1)
	go func() {
		_, err := waiter.Acquire(ctxFor(t), testkit.Blocking(reqFor(key)))
		errc <- err
	}()
	waitFor(t, "the waiter's entry", func() bool { return len(entries(t, cli, key)) == 2 })
	sess := waiter.liveSession()
	if _, err := cli.Revoke(ctxFor(t), sess.id); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, ErrSessionLost) || errors.Is(err, driver.ErrLocked) {
			t.Fatalf("Acquire after its session was revoked: %v, want ErrSessionLost", err)
		}
		// Transient: the core's waiting Lock tries again, under a new
		// session.
		if m, ok := errors.AsType[interface {
			error
			Transient() bool
		}](err); !ok || !m.Transient() {
			t.Errorf("Acquire after its session was revoked: %v is not marked transient", err)
		}
	case <-time.After(testTTL + slack):
		t.Fatal("the waiter whose session was revoked went on waiting")
	}
	// The next lock of the waiter's Driver gets a new session.
	if err := l.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	l2 := mustTry(t, waiter, reqFor(key))
	if waiter.liveSession().id == sess.id {
		t.Error("the Driver kept using its revoked session")
	}
	_ = l2.Release(ctxFor(t))
}

// The same through the core, with the session lost to a partition: the lease
// expires on the server because no keepalive gets through, and the waiting
// Lock rides that out (the loss is transient) instead of returning it: once
// the link is back and the lock free, it is granted, under a new session.
func TestLockRidesOutPartition(t *testing.T) {
	cli := newCli(t)
	holder := newTestDriver(t, cli)
	p := containerfaults.NewProxy(t, endpoints(t)[0])
	pcli := newCliAt(t, p.Addr())
	waiter := newTestDriver(t, pcli)
	c := testkit.Client(t, waiter, dlock.WithTTL(testTTL))
	key := testkit.Key(t)
	// The holder holds through a Client, which renews its lock for as
	// long as the case needs.
	hc := testkit.Client(t, holder, dlock.WithTTL(testTTL))
	hm := testkit.Mutex(t, hc, key)
	l, err := hm.TryLock(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(context.Background())
	m := testkit.Mutex(t, c, key)

	type outcome struct {
		l   dlock.Lease
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		l, err := m.Lock(ctxFor(t))
		done <- outcome{l, err}
	}()
	waitFor(t, "the waiter's entry", func() bool { return len(entries(t, cli, key)) == 2 })
	lostSession := waiter.liveSession().id
	cut(t, p)
	// etcd expires the partitioned session, and with it the waiter's entry.
	waitFor(t, "etcd expiring the partitioned waiter's entry", func() bool { return len(entries(t, cli, key)) == 1 })
	waitFor(t, "the waiter's Driver seeing its session lost", func() bool { return waiter.liveSession() == nil })
	select {
	case o := <-done:
		t.Fatalf("Lock cut off from etcd returned %v (err %v), want it waiting", o.l, o.err)
	default:
	}
	restore(t, p)
	if err := l.Unlock(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-done:
		if o.err != nil {
			t.Fatalf("Lock after the partition: %v, want the lock", o.err)
		}
		defer o.l.Unlock(context.Background())
		if o.l.Token() <= l.Token() {
			t.Errorf("token %d after the partition, not above the holder's %d", o.l.Token(), l.Token())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not granted the lock within 10 s of the partition's end and the release")
	}
	if s := waiter.liveSession(); s == nil || s.id == lostSession {
		t.Error("the waiter's Driver did not take a new session after the partition")
	}
}

// A release that is retried, or comes late, must not delete a newer lock of
// the same key even when it is the same session's with the same name (etcd
// issue #22082: concurrency.Mutex names its key after the session only, and
// Unlock deletes by name). Here the caller reuses the request ID, so the
// second grant's key has exactly the first one's name.
func TestStaleReleaseSameSessionSameName(t *testing.T) {
	cli := newCli(t)
	d, other := newTestDriver(t, cli), newTestDriver(t, newCli(t))
	key := testkit.Key(t)
	req := reqFor(key)
	l1 := mustTry(t, d, req)
	if err := l1.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	l2 := mustTry(t, d, req)
	if l2.(*lease).key != l1.(*lease).key {
		t.Fatalf("the two grants have different names (%q, %q): the test needs one", l1.(*lease).key, l2.(*lease).key)
	}
	// A retried release, and one that comes from a copy of the lease that
	// never saw its first release succeed, both go by the old revision.
	stale := &lease{d: d, key: l1.(*lease).key, rev: l1.(*lease).rev, sess: l1.(*lease).sess}
	d.deadlines.Schedule(&stale.expiry, stale, time.Now().Add(time.Hour))
	for name, rel := range map[string]func(context.Context) error{"retried": l1.Release, "late": stale.Release} {
		if err := rel(ctxFor(t)); !errors.Is(err, driver.ErrNotHeld) {
			t.Errorf("%s release of the first grant: %v, want ErrNotHeld", name, err)
		}
	}
	if err := stale.Extend(ctxFor(t), testTTL); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("stale Extend: %v, want ErrNotHeld", err)
	}
	expectHeld(t, other, key, "the second grant must survive the first one's stale release")
	if err := l2.Extend(ctxFor(t), testTTL); err != nil {
		t.Fatalf("the second grant's Extend: %v", err)
	}
	if err := l2.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
}

// Overwriting the holder's key keeps its create revision; the mod revision
// tells Extend and Release that it is not ours any more.
func TestOverwrittenKeyIsNotOurs(t *testing.T) {
	cli := newCli(t)
	d := newTestDriver(t, cli)
	key := testkit.Key(t)
	l := mustTry(t, d, reqFor(key))
	name := l.(*lease).key
	if _, err := cli.Put(ctxFor(t), name, "stranger"); err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(ctxFor(t), testTTL); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Extend of an overwritten lock: %v, want ErrNotHeld", err)
	}
	waitDone(t, lostContext(l), slack, "the lost signal of an overwritten lock")
	if err := l.Release(ctxFor(t)); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Release of an overwritten lock: %v, want ErrNotHeld", err)
	}
	resp, err := cli.Get(ctxFor(t), name)
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "stranger" {
		t.Fatalf("the stranger's key after the old holder's release: %v, %v", resp, err)
	}
	_, _ = cli.Delete(ctxFor(t), name)
}

// etcd's Mutex gives no way to learn that it is no longer held (etcd issue
// #6127). Here every way of losing the lock reaches the lease's Lost context
// and the core's Done channel.
func TestLostSignal(t *testing.T) {
	t.Run("key deleted", func(t *testing.T) {
		cli := newCli(t)
		c := testkit.Client(t, newTestDriver(t, cli), dlock.WithTTL(testTTL))
		key := testkit.Key(t)
		m, _ := c.Mutex(key)
		l := testkit.Lock(t, ctxFor(t), m)
		if _, err := cli.Delete(ctxFor(t), namesOf(DefaultKeyPrefix, key).dir, clientv3.WithPrefix()); err != nil {
			t.Fatal(err)
		}
		select {
		case <-l.Done():
		case <-time.After(testTTL + slack):
			t.Fatal("no lost signal after the lock's key was deleted")
		}
		if err := l.Err(); !errors.Is(err, dlock.ErrLockLost) {
			t.Errorf("Err: %v, want ErrLockLost", err)
		}
	})
	t.Run("session revoked", func(t *testing.T) {
		cli := newCli(t)
		d := newTestDriver(t, cli)
		l := mustTry(t, d, reqFor(testkit.Key(t)))
		if _, err := cli.Revoke(ctxFor(t), d.liveSession().id); err != nil {
			t.Fatal(err)
		}
		lost := lostContext(l)
		waitDone(t, lost, testTTL+slack, "the lost signal after the session was revoked")
		if err := context.Cause(lost); !errors.Is(err, ErrSessionLost) {
			t.Errorf("cause: %v, want ErrSessionLost", err)
		}
		if err := l.Extend(ctxFor(t), testTTL); !errors.Is(err, driver.ErrNotHeld) {
			t.Errorf("Extend after the loss: %v, want ErrNotHeld", err)
		}
	})
	t.Run("partitioned", func(t *testing.T) {
		// The holder's link goes silent: the lease is uncertain at once, lost
		// by the time its keepalives could no longer have kept it, and only
		// then can a contender (on a working link) take the lock.
		cli := newCli(t)
		p := containerfaults.NewProxy(t, endpoints(t)[0])
		pcli := newCliAt(t, p.Addr())
		holder, contender := newTestDriver(t, pcli), newTestDriver(t, cli)
		key := testkit.Key(t)
		l := mustTry(t, holder, reqFor(key)).(*lease)
		lost := lostContext(l)
		got := make(chan driver.Lease, 1)
		go func() {
			cl, err := contender.Acquire(ctxFor(t), testkit.Blocking(reqFor(key)))
			if err != nil {
				t.Errorf("contender: %v", err)
			}
			got <- cl
		}()
		waitFor(t, "the contender's entry", func() bool { return len(entries(t, cli, key)) == 2 })
		cut(t, p)
		defer restore(t, p)
		waitFor(t, "Uncertain reporting the silent link", func() bool {
			if lost.Err() != nil {
				t.Fatalf("lost (%v) before being reported uncertain", context.Cause(lost))
			}
			return l.Uncertain() != nil
		})
		var cl driver.Lease
		select {
		case cl = <-got:
		case <-time.After(2*testTTL + slack):
			t.Fatal("the contender never got the lock of the partitioned holder")
		}
		if lost.Err() == nil {
			t.Fatal("the contender was granted the lock while the partitioned holder had not been told it lost it")
		}
		// Lost with the session, or by the driver's own deadline when the
		// last keepalive came after the grant (nothing extends this lease).
		if err := context.Cause(lost); !errors.Is(err, ErrSessionLost) && !errors.Is(err, errExpired) {
			t.Errorf("cause: %v, want ErrSessionLost or errExpired", err)
		}
		if cl != nil {
			_ = cl.Release(ctxFor(t))
		}
	})
}

func TestMutexTTLBoundedBySession(t *testing.T) {
	c := testkit.Client(t, newTestDriver(t, newCli(t)))
	if _, err := c.Mutex("k", dlock.WithTTL(testTTL+time.Millisecond)); !errors.Is(err, dlock.ErrInvalidTTL) {
		t.Errorf("a TTL over the session's: %v, want ErrInvalidTTL", err)
	}
	if _, err := c.Mutex("k", dlock.WithTTL(testTTL)); err != nil {
		t.Errorf("the session's TTL: %v", err)
	}
	if _, err := c.Mutex("k"); !errors.Is(err, dlock.ErrInvalidTTL) {
		t.Errorf("the default TTL (15 s) on a 1 s session: %v, want ErrInvalidTTL", err)
	}
}

// waitFor polls cond every few milliseconds (the test observes etcd, which
// it cannot subscribe to) until it holds, failing after a generous bound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitWithin(t, 10*time.Second, what, cond)
}

// waitWithin is waitFor with a bound of its own, for what takes the
// backend's own recovery (an election, a member catching up), which a
// loaded 2-core machine can stretch far beyond its nominal time.
func waitWithin(t *testing.T, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within %v", what, bound)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestExtendBatch(t *testing.T) {
	// The test holds 300 locks while it takes, extends and releases them one
	// round trip after another: over 600 round trips, seconds under -race
	// on a loaded machine. Its locks and session therefore have a TTL that
	// no expiry can happen within; expiry is what other tests are about.
	const batchTTL = time.Minute
	cli := newCli(t)
	d := newTestDriver(t, cli, WithSessionTTL(batchTTL))
	batchReq := func(key string) driver.Request {
		r := reqFor(key)
		r.TTL = batchTTL
		return r
	}
	var leases []driver.Lease
	var ttls []time.Duration
	for range 300 { // several transactions' worth
		leases = append(leases, mustTry(t, d, batchReq(testkit.Key(t))))
		ttls = append(ttls, batchTTL)
	}
	owner := batchReq(testkit.Key(t))
	owner.Owner = "o"
	leases = append(leases, mustTry(t, d, owner))
	ttls = append(ttls, batchTTL)
	gone, ended := 7, 8
	if _, err := cli.Delete(ctxFor(t), leases[gone].(*lease).key); err != nil {
		t.Fatal(err)
	}
	if err := leases[ended].Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	other := newTestDriver(t, newCli(t), WithSessionTTL(batchTTL))
	foreign := mustTry(t, other, batchReq(testkit.Key(t)))
	errs := d.ExtendBatch(ctxFor(t), append(leases, foreign), append(ttls, batchTTL))
	for i, err := range errs {
		switch i {
		case gone, ended:
			if !errors.Is(err, driver.ErrNotHeld) {
				t.Errorf("lease %d: %v, want ErrNotHeld", i, err)
			}
		case len(leases):
			if !errors.Is(err, errForeignLease) {
				t.Errorf("another driver's lease: %v, want errForeignLease", err)
			}
		default:
			if err != nil {
				t.Errorf("lease %d: %v", i, err)
			}
		}
	}
	if lostContext(leases[gone]).Err() == nil {
		t.Error("the lease whose key was deleted is not reported lost")
	}
	for i, l := range leases {
		if i != gone && i != ended {
			if err := l.Release(ctxFor(t)); err != nil {
				t.Errorf("lease %d: Release: %v", i, err)
			}
		}
	}
	_ = foreign.Release(ctxFor(t))
}

func TestInspect(t *testing.T) {
	cli := newCli(t)
	d := newTestDriver(t, cli)
	key := testkit.Key(t)
	info, err := d.Inspect(ctxFor(t), key)
	if err != nil || info.Held || info.Waiters != 0 {
		t.Fatalf("free lock: %+v, %v", info, err)
	}
	r1, r2, w := reqFor(key), reqFor(key), reqFor(key)
	r1.Mode, r2.Mode = driver.Shared, driver.Shared
	l1, l2 := mustTry(t, d, r1), mustTry(t, d, r2)
	ctx, cancel := context.WithCancel(ctxFor(t))
	waited := make(chan error, 1)
	go func() {
		_, err := d.Acquire(ctx, testkit.Blocking(w))
		waited <- err
	}()
	waitFor(t, "the writer's entry", func() bool { return len(entries(t, cli, key)) == 3 })
	info, err = d.Inspect(ctxFor(t), key)
	if err != nil || !info.Held || info.Mode != driver.Shared || info.Holders != 2 || info.Waiters != 1 || info.Token != l1.Token() {
		t.Errorf("two readers and a writer waiting: %+v, %v", info, err)
	}
	cancel()
	<-waited
	_ = l1.Release(ctxFor(t))
	_ = l2.Release(ctxFor(t))

	o := reqFor(key)
	o.Owner = "owner/1"
	lo := mustTry(t, d, o)
	info, err = d.Inspect(ctxFor(t), key)
	if err != nil || !info.Held || info.Mode != driver.Exclusive || info.Holders != 1 || info.Owner != "owner/1" || info.Token != lo.Token() {
		t.Errorf("an owner's hold: %+v, %v", info, err)
	}
	_ = lo.Release(ctxFor(t))
	lw := mustTry(t, d, w)
	if info, err = d.Inspect(ctxFor(t), key); err != nil || info.Owner != w.ID {
		t.Errorf("a writer: %+v, %v; want owner %q", info, err, w.ID)
	}
	_ = lw.Release(ctxFor(t))
}

// The holders of one owner's reentrant hold on two clients: the hold
// outlives the client that vanishes (its member entry goes with its
// session), and the lock is free once the last member leaves.
func TestReentrantHoldOutlivesOneClient(t *testing.T) {
	cli := newCli(t)
	d1, d2 := newTestDriver(t, newCli(t)), newTestDriver(t, newCli(t))
	contender := newTestDriver(t, cli)
	key := testkit.Key(t)
	r1, r2 := reqFor(key), reqFor(key)
	r1.Owner, r2.Owner = "job-42", "job-42"
	l1, l2 := mustTry(t, d1, r1), mustTry(t, d2, r2)
	if l1.Token() != l2.Token() {
		t.Fatalf("tokens %d and %d, want one hold", l1.Token(), l2.Token())
	}
	_ = d1.Close() // vanishes without releasing
	// Well past d1's session TTL, d2 still holds the lock, renewing it.
	for end := time.Now().Add(3 * testTTL); time.Now().Before(end); time.Sleep(testTTL / 4) {
		if err := l2.Extend(ctxFor(t), testTTL); err != nil {
			t.Fatalf("Extend of the remaining member: %v", err)
		}
		expectHeld(t, contender, key, "one member of the hold remains")
	}
	if err := l2.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	if n := len(entries(t, cli, key)); n != 0 {
		t.Errorf("%d etcd keys after the last member left, want none", n)
	}
	mustTry(t, contender, reqFor(key)).Release(ctxFor(t))
}

// etcdEvents returns how many watch events the test server has sent.
func etcdEvents(t *testing.T) float64 {
	t.Helper()
	resp, err := http.Get(metricsURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "etcd_debugging_mvcc_events_total "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatal("no etcd_debugging_mvcc_events_total in the server's metrics")
	return 0
}

// Each waiter watches only the entry just ahead of it, so a release wakes
// one waiter, not all of them: with 12 waiters queued, 12 handoffs cost
// about 12 watch events, where watching the whole queue would cost 78.
func TestNoHerd(t *testing.T) {
	server.NeedFaults(t) // counts the container's own metrics
	cli := newCli(t)
	key := testkit.Key(t)
	const waiters = 12
	// The first holder's TTL outlasts the waiters' queueing, which takes
	// seconds on a loaded machine: with testTTL, its lock could end by its
	// TTL (the driver deletes a lock not extended in time) before the
	// release the test counts from.
	const holdTTL = 20 * time.Second
	holder := newTestDriver(t, cli, WithSessionTTL(holdTTL))
	first := mustTry(t, holder, testkit.Request(key, holdTTL))
	var wg sync.WaitGroup
	for range waiters {
		d := newTestDriver(t, newCli(t))
		wg.Go(func() {
			l, err := d.Acquire(ctxFor(t), testkit.Blocking(reqFor(key)))
			if err != nil {
				t.Error(err)
				return
			}
			_ = l.Release(ctxFor(t)) // hand over at once
		})
	}
	waitFor(t, "every waiter queued", func() bool { return len(entries(t, cli, key)) == waiters+1 })
	before := etcdEvents(t)
	if err := first.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	n := etcdEvents(t) - before
	t.Logf("%v watch events for %d handoffs", n, waiters)
	if n > 2*waiters {
		t.Errorf("%v watch events for %d handoffs, want about one per handoff", n, waiters)
	}
}

// A queue entry's put whose outcome was unknown, tidied, and then applied by
// etcd after its tidying (etcd runs concurrent requests in no set order)
// must write nothing: the tidying moved the session's fence, which the put
// requires unmoved. Without the fence the entry would stay under the
// session lease, and hold the lock, for as long as the Driver lives.
func TestLatePutAfterTidyWritesNothing(t *testing.T) {
	cli := newCli(t)
	d := newTestDriver(t, cli)
	ctx := ctxFor(t)
	sess, err := d.confirmedSession(ctx, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	key := testkit.Key(t)
	req := reqFor(key)
	n := namesOf(d.prefix, key)
	me := n.contender(req.Mode, sess.id, req.ID)
	seen := sess.fence.Load() // as the put in flight saw it

	// The request's caller gave up with the put in flight: the entry is
	// tidied by its name, before etcd has applied the put.
	d.abandon(ctx, sess, me, 0, req.TTL)
	if sess.fence.Load() == seen {
		t.Fatal("tidying an unknown outcome did not move the session's fence")
	}
	// Now etcd applies the late put.
	put := clientv3.OpPut(me, "", clientv3.WithLease(sess.id))
	_, _, _, moved, err := d.fencedTxnAt(ctx, sess, seen, nil, []clientv3.Op{put, aheadOp(n.blockers(req.Mode), 0, 3)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !moved {
		t.Error("the late put was applied over a moved fence")
	}
	if got := entries(t, cli, key); len(got) != 0 {
		t.Fatalf("%d queue entries after the late put, want none: the lock is held by nobody for as long as the session lives", len(got))
	}
	// The Driver's next request sees the new fence and gets the lock.
	l := mustTry(t, d, reqFor(key))
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// cut silences p's link (a partition: bytes held both ways, connections
// left open) and restore delivers what it held and lets bytes through again.
func cut(t *testing.T, p *containerfaults.Proxy) {
	t.Helper()
	if err := p.Cut(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func restore(t *testing.T, p *containerfaults.Proxy) {
	t.Helper()
	if err := p.Restore(context.Background()); err != nil {
		t.Error(err)
	}
}
