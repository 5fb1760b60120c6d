package postgres

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

func sharedReq(key string, ttl time.Duration) driver.Request {
	r := testkit.Request(key, ttl)
	r.Mode = driver.Shared
	return r
}

func ownerReq(key, owner string, mode driver.Mode, ttl time.Duration) driver.Request {
	r := testkit.Request(key, ttl)
	r.Owner, r.Mode = owner, mode
	return r
}

func mustTry(t *testing.T, d *Driver, req driver.Request) driver.Lease {
	t.Helper()
	l, err := d.Acquire(ctxFor(t), req)
	if err != nil {
		t.Fatalf("Acquire(%q, %s, owner %q): %v", req.Key, req.Mode, req.Owner, err)
	}
	return l
}

func expectLocked(t *testing.T, d *Driver, req driver.Request, why string) {
	t.Helper()
	l, err := d.Acquire(ctxFor(t), req)
	if err == nil {
		_ = l.Release(ctxFor(t))
		t.Fatalf("Acquire(%q, %s, owner %q) succeeded, want ErrLocked: %s", req.Key, req.Mode, req.Owner, why)
	}
	if !errors.Is(err, driver.ErrLocked) {
		t.Fatalf("Acquire(%q, %s, owner %q): got %v, want ErrLocked: %s", req.Key, req.Mode, req.Owner, err, why)
	}
}

func mustRelease(t *testing.T, l driver.Lease) {
	t.Helper()
	if err := l.Release(ctxFor(t)); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// sessionsHolding returns how many server sessions hold the advisory key id.
func sessionsHolding(t *testing.T, admin *pgconn.PgConn, id int64) int {
	t.Helper()
	pids, err := holders(ctxFor(t), admin, id)
	if err != nil {
		t.Fatalf("pg_locks: %v", err)
	}
	return len(pids)
}

// queryText runs sql on c and returns the first column of its first row.
func queryText(t *testing.T, c *pgconn.PgConn, sql string) string {
	t.Helper()
	results, err := c.Exec(ctxFor(t), sql).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	for _, r := range results {
		if len(r.Rows) > 0 {
			return string(r.Rows[0][0])
		}
	}
	return ""
}

func TestExclusive(t *testing.T) {
	noLeaks(t)
	d1, d2 := newTestDriver(t), newTestDriver(t)
	admin := rawConn(t)
	key := testkit.Key(t)
	l1 := mustTry(t, d1, testkit.Request(key, 5*time.Second))
	if l1.Token() == 0 {
		t.Fatal("token 0, want a fencing token")
	}
	if v := l1.Validity(); v < 5*time.Second || v > 5*time.Second+time.Second {
		t.Fatalf("validity %v, want 5s plus at most the statement's time", v)
	}
	if n := sessionsHolding(t, admin, KeyID(key)); n != 1 {
		t.Fatalf("%d sessions hold the advisory key, want 1", n)
	}
	expectLocked(t, d2, testkit.Request(key, time.Second), "d1 holds it")
	expectLocked(t, d1, testkit.Request(key, time.Second), "d1 holds it: the same Driver must not stack a second hold")
	expectLocked(t, d2, sharedReq(key, time.Second), "a writer excludes readers")
	if err := l1.Extend(ctxFor(t), 5*time.Second); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	mustRelease(t, l1)
	if n := sessionsHolding(t, admin, KeyID(key)); n != 0 {
		t.Fatalf("%d sessions hold the advisory key after Release, want 0", n)
	}
	if err := l1.Release(ctxFor(t)); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("second Release: got %v, want ErrNotHeld", err)
	}
	if err := l1.Extend(ctxFor(t), time.Second); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("Extend after Release: got %v, want ErrNotHeld", err)
	}
	l2 := mustTry(t, d2, testkit.Request(key, time.Second))
	if l2.Token() <= l1.Token() {
		t.Fatalf("token %d after %d, want it to increase", l2.Token(), l1.Token())
	}
	mustRelease(t, l2)
	// The connection went back to the idle list and is reused.
	before := d1.sessions.dials.Load()
	for range 3 {
		mustRelease(t, mustTry(t, d1, testkit.Request(key, time.Second)))
	}
	if after := d1.sessions.dials.Load(); after != before {
		t.Fatalf("%d new connections for 3 sequential locks, want the idle one reused", after-before)
	}
}

func TestExplicitAdvisoryKey(t *testing.T) {
	d := newTestDriver(t)
	stranger := rawConn(t)
	var b [8]byte
	_, _ = rand.Read(b[:])
	id := int64(b[0])<<56 | int64(b[1])<<48 | int64(b[2])<<40 | int64(b[3])<<32 | int64(b[4])<<24 | int64(b[5])<<16 | int64(b[6])<<8 | int64(b[7])
	key := AdvisoryKey(id)
	if got := KeyID(key); got != id {
		t.Fatalf("KeyID(AdvisoryKey(%d)) = %d", id, got)
	}
	if got := queryText(t, stranger, fmt.Sprintf("SELECT pg_try_advisory_lock(%d)", id)); got != "t" {
		t.Fatalf("stranger's pg_try_advisory_lock: %q", got)
	}
	expectLocked(t, d, testkit.Request(key, time.Second), "a stranger holds pg_advisory_lock(id)")
	queryText(t, stranger, fmt.Sprintf("SELECT pg_advisory_unlock(%d)", id))
	l := mustTry(t, d, testkit.Request(key, 5*time.Second))
	if got := queryText(t, stranger, fmt.Sprintf("SELECT pg_try_advisory_lock(%d)", id)); got != "f" {
		t.Fatalf("stranger's pg_try_advisory_lock while dlock holds AdvisoryKey(id): %q, want f", got)
	}
	mustRelease(t, l)

	// A malformed explicit key is refused by the core, through CheckKey.
	c, err := dlock.New(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{explicitPrefix, explicitPrefix + "x", explicitPrefix + "01", explicitPrefix + "+1", explicitPrefix + "-0", explicitPrefix + "99999999999999999999"} {
		if _, err := c.Mutex(bad); !errors.Is(err, dlock.ErrInvalidKey) {
			t.Errorf("Mutex(%q): got %v, want ErrInvalidKey", bad, err)
		}
	}
}

func TestShared(t *testing.T) {
	d1, d2, d3 := newTestDriver(t), newTestDriver(t), newTestDriver(t)
	admin := rawConn(t)
	key := testkit.Key(t)
	r1 := mustTry(t, d1, sharedReq(key, 5*time.Second))
	r2 := mustTry(t, d2, sharedReq(key, 5*time.Second))
	r3 := mustTry(t, d1, sharedReq(key, 5*time.Second)) // same Driver, own session
	if n := sessionsHolding(t, admin, KeyID(key)); n != 3 {
		t.Fatalf("%d sessions hold the key shared, want 3", n)
	}
	if r1.Token() == r2.Token() || r2.Token() == r3.Token() {
		t.Fatalf("reader tokens %d %d %d, want one per grant", r1.Token(), r2.Token(), r3.Token())
	}
	expectLocked(t, d3, testkit.Request(key, time.Second), "three readers hold it")
	for _, l := range []driver.Lease{r1, r2} {
		if err := l.Extend(ctxFor(t), 5*time.Second); err != nil {
			t.Fatalf("reader's Extend: %v", err)
		}
		mustRelease(t, l)
		expectLocked(t, d3, testkit.Request(key, time.Second), "a reader is still inside")
	}
	mustRelease(t, r3)
	w := mustTry(t, d3, testkit.Request(key, 5*time.Second))
	expectLocked(t, d1, sharedReq(key, time.Second), "a writer holds it")
	mustRelease(t, w)
}

func TestReentrantAcrossDrivers(t *testing.T) {
	noLeaks(t)
	d1, d2, d3 := newTestDriver(t), newTestDriver(t), newTestDriver(t)
	admin := rawConn(t)
	key := testkit.Key(t)
	const ttl = 5 * time.Second
	a1 := mustTry(t, d1, ownerReq(key, "a", driver.Exclusive, ttl))
	a2 := mustTry(t, d2, ownerReq(key, "a", driver.Exclusive, ttl))
	a3 := mustTry(t, d1, ownerReq(key, "a", driver.Exclusive, ttl))
	if a2.Token() != a1.Token() || a3.Token() != a1.Token() {
		t.Fatalf("re-entry tokens %d %d %d, want the group's one token", a1.Token(), a2.Token(), a3.Token())
	}
	k := keysOf(key, "a", false)
	if n := sessionsHolding(t, admin, k.group); n != 3 {
		t.Fatalf("%d sessions are members of the group, want 3 (one per hold)", n)
	}
	expectLocked(t, d3, ownerReq(key, "b", driver.Exclusive, ttl), "owner a holds it")
	expectLocked(t, d3, ownerReq(key, "b", driver.Shared, ttl), "owner a holds it")
	expectLocked(t, d3, ownerReq(key, "a", driver.Shared, ttl), "owner a holds it exclusively; its read lock is another hold")
	expectLocked(t, d3, testkit.Request(key, ttl), "owner a holds it")
	expectLocked(t, d3, sharedReq(key, ttl), "owner a holds it")
	for _, l := range []driver.Lease{a1, a3} { // the first member leaves first
		mustRelease(t, l)
		expectLocked(t, d3, testkit.Request(key, ttl), "a member of owner a's group is left")
		expectLocked(t, d3, ownerReq(key, "b", driver.Exclusive, ttl), "a member of owner a's group is left")
	}
	if err := a2.Extend(ctxFor(t), ttl); err != nil {
		t.Fatalf("the last member's Extend: %v", err)
	}
	mustRelease(t, a2)
	b := mustTry(t, d3, ownerReq(key, "b", driver.Exclusive, ttl))
	if b.Token() <= a1.Token() {
		t.Fatalf("owner b's token %d after owner a's %d, want more", b.Token(), a1.Token())
	}
	mustRelease(t, b)
	// The group's row went with its last member.
	if got := queryText(t, admin, fmt.Sprintf("SELECT count(*) FROM public.dlock_owner_groups WHERE gkey IN (%d, %d)", k.group, keysOf(key, "b", false).group)); got != "0" {
		t.Fatalf("%s owner group rows left after the groups ended, want 0", got)
	}
	// A new group of owner a gets a new token.
	a4 := mustTry(t, d2, ownerReq(key, "a", driver.Exclusive, ttl))
	if a4.Token() <= b.Token() {
		t.Fatalf("token of a new group %d, want more than %d", a4.Token(), b.Token())
	}
	mustRelease(t, a4)
}

func TestReentrantShared(t *testing.T) {
	d1, d2 := newTestDriver(t), newTestDriver(t)
	key := testkit.Key(t)
	const ttl = 5 * time.Second
	a1 := mustTry(t, d1, ownerReq(key, "a", driver.Shared, ttl))
	r := mustTry(t, d2, sharedReq(key, ttl))                     // plain readers share
	b1 := mustTry(t, d2, ownerReq(key, "b", driver.Shared, ttl)) // and other owners' readers
	a2 := mustTry(t, d2, ownerReq(key, "a", driver.Shared, ttl)) // re-entry
	if a2.Token() != a1.Token() || b1.Token() == a1.Token() {
		t.Fatalf("tokens a %d %d, b %d: want a's re-entry to share a's token, and b its own", a1.Token(), a2.Token(), b1.Token())
	}
	expectLocked(t, d1, testkit.Request(key, ttl), "readers hold it")
	expectLocked(t, d1, ownerReq(key, "a", driver.Exclusive, ttl), "readers (owner a's among them) hold it")
	for _, l := range []driver.Lease{a1, r, b1} {
		mustRelease(t, l)
		expectLocked(t, d1, testkit.Request(key, ttl), "a reader is left")
	}
	mustRelease(t, a2)
	mustRelease(t, mustTry(t, d1, testkit.Request(key, ttl)))
}

// A writer waiting in PostgreSQL's queue must not stall a re-entry by the
// owner that holds the lock: the re-entry is answered at once.
func TestReentryWhileWriterWaits(t *testing.T) {
	d1, d2 := newTestDriver(t), newTestDriver(t)
	key := testkit.Key(t)
	const ttl = 5 * time.Second
	a1 := mustTry(t, d1, ownerReq(key, "a", driver.Exclusive, ttl))
	waiting := make(chan error, 1)
	ctx, cancel := context.WithCancel(ctxFor(t))
	defer cancel()
	go func() {
		l, err := d2.Acquire(ctx, testkit.Blocking(testkit.Request(key, ttl)))
		if err == nil {
			err = l.Release(context.Background())
		}
		waiting <- err
	}()
	// Let the writer try (and find the group in its way) a few times.
	for range 5 {
		expectLocked(t, d1, testkit.Request(key, ttl), "the group holds it")
	}
	start := time.Now()
	a2, err := d1.Acquire(ctxFor(t), ownerReq(key, "a", driver.Exclusive, ttl))
	if err != nil {
		t.Fatalf("re-entry while a writer waits: %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("re-entry took %v, want an immediate answer", took)
	}
	select {
	case err := <-waiting:
		t.Fatalf("the writer's Lock returned (%v) while the group held the lock", err)
	default:
	}
	mustRelease(t, a1)
	mustRelease(t, a2)
	select {
	case err := <-waiting:
		if err != nil {
			t.Fatalf("the writer's Lock: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the writer did not get the lock after the group left")
	}
}

func TestOwnerLockWaits(t *testing.T) {
	d1, d2 := newTestDriver(t), newTestDriver(t)
	key := testkit.Key(t)
	const ttl = 5 * time.Second
	plain := mustTry(t, d1, testkit.Request(key, ttl))
	got := make(chan driver.Lease, 1)
	go func() {
		l, err := d2.Acquire(ctxFor(t), testkit.Blocking(ownerReq(key, "b", driver.Exclusive, ttl)))
		if err != nil {
			t.Errorf("owner Lock: %v", err)
		}
		got <- l
	}()
	expectLocked(t, d1, ownerReq(key, "c", driver.Exclusive, ttl), "a plain holder")
	mustRelease(t, plain)
	select {
	case l := <-got:
		if l != nil {
			mustRelease(t, l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the owner's Lock did not get the lock once it was free")
	}
}

func TestMarkerGuardsForeignSession(t *testing.T) {
	d := newTestDriver(t)
	admin := rawConn(t)
	key := testkit.Key(t)
	mustRelease(t, mustTry(t, d, testkit.Request(key, time.Second))) // one idle session now
	// Make the idle session look like someone else's, as a pooler that
	// swapped server sessions would.
	s, err := d.sessions.get(ctxFor(t), true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.simple(ctxFor(t), "SELECT set_config('dlock.session', 'someone-else', false)"); err != nil {
		t.Fatal(err)
	}
	d.sessions.put(s)
	_, err = d.Acquire(ctxFor(t), testkit.Request(key, time.Second))
	if !errors.Is(err, ErrSessionChanged) {
		t.Fatalf("Acquire on a foreign session: got %v, want ErrSessionChanged", err)
	}
	if n := sessionsHolding(t, admin, KeyID(key)); n != 0 {
		t.Fatalf("%d sessions hold the key after a refused statement, want 0: it must lock nothing on a foreign session", n)
	}
	// The foreign connection was dropped; the next one is fine.
	mustRelease(t, mustTry(t, d, testkit.Request(key, time.Second)))
}

func TestIdleSessionTimeoutRestored(t *testing.T) {
	d := newTestDriver(t)
	key := testkit.Key(t)
	l := mustTry(t, d, testkit.Request(key, 1500*time.Millisecond))
	mustRelease(t, l)
	s, err := d.sessions.get(ctxFor(t), true)
	if err != nil {
		t.Fatal(err)
	}
	defer d.sessions.put(s)
	row, err := s.simple(ctxFor(t), "SHOW idle_session_timeout")
	if err != nil {
		t.Fatal(err)
	}
	if len(row) != 1 || row[0] != "0" {
		t.Fatalf("idle_session_timeout after release: %v, want the session's own 0", row)
	}
}

// TestNoLossAfterRelease: a released lease never reports a loss, not even
// when its watched connection ends or its Driver closes afterwards, while a
// held one reports Close's.
func TestNoLossAfterRelease(t *testing.T) {
	noLeaks(t)
	d := newTestDriver(t)
	var mu sync.Mutex
	var reports []error
	report := func(reason error) {
		mu.Lock()
		reports = append(reports, reason)
		mu.Unlock()
	}
	released := mustTry(t, d, testkit.Request(testkit.Key(t), 5*time.Second))
	released.OnLoss(report)
	if err := released.Extend(ctxFor(t), 5*time.Second); err != nil { // watched from now on
		t.Fatalf("Extend: %v", err)
	}
	mustRelease(t, released)
	held := mustTry(t, d, testkit.Request(testkit.Key(t), 5*time.Second))
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if cause := lostWithin(t, held, 5*time.Second, "a held lease after Close"); !errors.Is(cause, driver.ErrClosed) {
		t.Fatalf("loss reason after Close: %v, want ErrClosed", cause)
	}
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(reports) > 0 {
		t.Errorf("the released lease reported losses: %v", reports)
	}
}

func TestUseAfterClose(t *testing.T) {
	noLeaks(t)
	d := newTestDriver(t)
	key := testkit.Key(t)
	l := mustTry(t, d, testkit.Request(key, 5*time.Second))
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if cause := lostWithin(t, l, 5*time.Second, "a held lease after Close"); !errors.Is(cause, driver.ErrClosed) {
		t.Fatalf("loss reason after Close: %v, want ErrClosed", cause)
	}
	for name, err := range map[string]error{
		"Acquire":          errOf(d.Acquire(ctxFor(t), testkit.Request(key, time.Second))),
		"blocking Acquire": errOf(d.Acquire(ctxFor(t), testkit.Blocking(testkit.Request(key, time.Second)))),
		"Extend":           l.Extend(ctxFor(t), time.Second),
		"Release":          l.Release(ctxFor(t)),
	} {
		if !errors.Is(err, driver.ErrClosed) {
			t.Errorf("%s after Close: got %v, want ErrClosed", name, err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	// Its locks ended with its connections.
	mustRelease(t, mustTry(t, newTestDriver(t), testkit.Request(key, time.Second)))
}

func errOf[V any](_ V, err error) error { return err }

func TestConnLimit(t *testing.T) {
	d := newTestDriver(t, WithMaxConns(1))
	k1, k2 := testkit.Key(t), testkit.Key(t)
	l1 := mustTry(t, d, testkit.Request(k1, 5*time.Second))
	if _, err := d.Acquire(ctxFor(t), testkit.Request(k2, time.Second)); !errors.Is(err, ErrConnLimit) {
		t.Fatalf("Acquire with the only connection holding a lock: got %v, want ErrConnLimit", err)
	}
	got := make(chan error, 1)
	go func() {
		l2, err := d.Acquire(ctxFor(t), testkit.Blocking(testkit.Request(k2, time.Second)))
		if err == nil {
			err = l2.Release(ctxFor(t))
		}
		got <- err
	}()
	ctx, cancel := context.WithTimeout(ctxFor(t), 100*time.Millisecond)
	defer cancel()
	if _, err := d.Acquire(ctx, testkit.Blocking(testkit.Request(testkit.Key(t), time.Second))); err != context.DeadlineExceeded {
		t.Fatalf("Acquire waiting for a connection past its deadline: got %v, want exactly context.DeadlineExceeded", err)
	}
	mustRelease(t, l1) // its connection passes to the waiting Acquire
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("Acquire that waited for a connection: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Acquire did not get the connection given back")
	}
	if n := d.sessions.dials.Load(); n != 1 {
		t.Fatalf("%d connections made, want 1", n)
	}
}

func TestInspect(t *testing.T) {
	d, other := newTestDriver(t), newTestDriver(t)
	key := testkit.Key(t)
	info, err := d.Inspect(ctxFor(t), key)
	if err != nil || info.Held || info.Waiters != 0 {
		t.Fatalf("Inspect of a free lock: %+v, %v", info, err)
	}
	l := mustTry(t, other, testkit.Request(key, 5*time.Second))
	waiting := make(chan driver.Lease, 1)
	go func() {
		l, err := d.Acquire(ctxFor(t), testkit.Blocking(testkit.Request(key, 5*time.Second)))
		if err != nil {
			t.Errorf("Acquire: %v", err)
		}
		waiting <- l
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err = d.Inspect(ctxFor(t), key)
		if err != nil {
			t.Fatal(err)
		}
		if info.Waiters == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond) // polls the server's view, as an operator would
	}
	if !info.Held || info.Mode != driver.Exclusive || info.Holders != 1 || info.Waiters != 1 {
		t.Fatalf("Inspect of a held lock with a waiter: %+v, want held exclusively by 1, 1 waiter", info)
	}
	mustRelease(t, l)
	if l := <-waiting; l != nil {
		mustRelease(t, l)
	}
	r1 := mustTry(t, d, sharedReq(key, 5*time.Second))
	r2 := mustTry(t, other, ownerReq(key, "o", driver.Shared, 5*time.Second))
	if info, err = d.Inspect(ctxFor(t), key); err != nil || !info.Held || info.Mode != driver.Shared || info.Holders != 2 {
		t.Fatalf("Inspect with two readers: %+v, %v", info, err)
	}
	mustRelease(t, r1)
	mustRelease(t, r2)
	g := mustTry(t, other, ownerReq(key, "o", driver.Exclusive, 5*time.Second))
	if info, err = d.Inspect(ctxFor(t), key); err != nil || !info.Held || info.Mode != driver.Exclusive || info.Holders != 1 {
		t.Fatalf("Inspect with an owner group: %+v, %v", info, err)
	}
	mustRelease(t, g)
}
