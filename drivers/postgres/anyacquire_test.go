package postgres

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

const anyTTL = 30 * time.Second

// anyReqs returns plain try requests for keys, as a semaphore sends them.
func anyReqs(keys ...string) []driver.Request {
	reqs := make([]driver.Request, len(keys))
	for i, k := range keys {
		reqs[i] = testkit.Request(k, anyTTL)
	}
	return reqs
}

// anyKeys returns n keys of the test's own.
func anyKeys(t *testing.T, n int) []string {
	base := testkit.Key(t)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = base + "/permit/" + strconv.Itoa(i)
	}
	return keys
}

// advisoryLocks returns how many session-level advisory locks (of the
// bigint form) the backend pid holds.
func advisoryLocks(t *testing.T, admin *pgconn.PgConn, pid string) int {
	t.Helper()
	n, err := strconv.Atoi(queryText(t, admin, "SELECT count(*)::text FROM pg_catalog.pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND granted AND pid = "+pid))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// holderOf returns the one backend that holds the advisory key of key.
func holderOf(t *testing.T, admin *pgconn.PgConn, key string) string {
	t.Helper()
	pids, err := holders(ctxFor(t), admin, KeyID(key))
	if err != nil || len(pids) != 1 {
		t.Fatalf("holders of %q: %v, %v; want one", key, pids, err)
	}
	return pids[0]
}

// AcquireAny takes the first free key in the order given, and only it; its
// lease is an ordinary one of that key: it excludes plain tries and is
// excluded by their holds, its token is the key's next, and it extends and
// releases as Acquire's leases do.
func TestAcquireAnyTakesFirstFree(t *testing.T) {
	noLeaks(t)
	admin := rawConn(t)
	d1, d2 := newTestDriver(t), newTestDriver(t)
	if d2.Capabilities().AnyAcquirer == nil {
		t.Fatal("the driver does not declare AnyAcquirer")
	}
	keys := anyKeys(t, 4)
	h0 := mustTry(t, d1, testkit.Request(keys[0], anyTTL))
	h2 := mustTry(t, d1, testkit.Request(keys[2], anyTTL))

	l, i, err := d2.AcquireAny(ctxFor(t), anyReqs(keys...))
	if err != nil {
		t.Fatalf("AcquireAny: %v", err)
	}
	if i != 1 {
		t.Fatalf("AcquireAny granted request %d, want 1, the first free one", i)
	}
	if l.Token() <= h2.Token() {
		t.Fatalf("token %d after a grant with token %d: want a later token", l.Token(), h2.Token())
	}
	pid := holderOf(t, admin, keys[1])
	if n := advisoryLocks(t, admin, pid); n != 1 {
		t.Fatalf("the grant's session holds %d advisory locks, want 1: AcquireAny must take one lock", n)
	}
	if n := sessionsHolding(t, admin, KeyID(keys[3])); n != 0 {
		t.Fatalf("%d sessions hold the key after the one granted", n)
	}
	expectLocked(t, d1, testkit.Request(keys[1], anyTTL), "AcquireAny's grant holds it")
	if err := l.Extend(ctxFor(t), anyTTL); err != nil {
		t.Fatalf("Extend of AcquireAny's lease: %v", err)
	}
	if info, err := d1.Inspect(ctxFor(t), keys[1]); err != nil || !info.Held || info.Mode != driver.Exclusive {
		t.Fatalf("Inspect of the granted key: %+v, %v; want held exclusive", info, err)
	}
	mustRelease(t, l)
	mustRelease(t, mustTry(t, d1, testkit.Request(keys[1], anyTTL)))

	// With the first key free, the first is taken.
	l, i, err = d2.AcquireAny(ctxFor(t), anyReqs(keys[1], keys[0], keys[3]))
	if err != nil || i != 0 {
		t.Fatalf("AcquireAny with the first key free: request %d, %v; want 0", i, err)
	}
	if n := sessionsHolding(t, admin, KeyID(keys[3])); n != 0 {
		t.Fatalf("%d sessions hold a key after the one granted", n)
	}
	mustRelease(t, l)
	mustRelease(t, h0)
	mustRelease(t, h2)
}

// Clients that ask for any key and clients that try one key at a time
// exclude each other: the keys are the same advisory locks either way.
func TestAcquireAnyExcludesPlainTries(t *testing.T) {
	noLeaks(t)
	const workers, rounds = 4, 40
	dAny, dEach := newTestDriver(t), newTestDriver(t)
	keys := anyKeys(t, 2)
	inside := make([]atomic.Int32, len(keys))
	hold := func(i int, l driver.Lease) {
		if n := inside[i].Add(1); n != 1 {
			t.Errorf("%d holders of %q at once", n, keys[i])
		}
		inside[i].Add(-1)
		if err := l.Release(ctxFor(t)); err != nil {
			t.Errorf("Release: %v", err)
		}
	}
	var granted atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				if w%2 == 0 {
					l, i, err := dAny.AcquireAny(ctxFor(t), anyReqs(keys...))
					switch {
					case err == nil:
						granted.Add(1)
						hold(i, l)
					case !errors.Is(err, driver.ErrLocked):
						t.Errorf("AcquireAny: %v", err)
						return
					}
					continue
				}
				i := r % len(keys)
				l, err := dEach.Acquire(ctxFor(t), testkit.Request(keys[i], anyTTL))
				switch {
				case err == nil:
					granted.Add(1)
					hold(i, l)
				case !errors.Is(err, driver.ErrLocked):
					t.Errorf("Acquire: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if granted.Load() == 0 {
		t.Error("nothing was granted: the test did not test anything")
	}
}

// When every key is held, AcquireAny returns ErrLocked and leaves nothing
// behind; its connection goes back to the idle list.
func TestAcquireAnyAllHeld(t *testing.T) {
	noLeaks(t)
	admin := rawConn(t)
	d1, d2 := newTestDriver(t), newTestDriver(t, WithMaxConns(1))
	keys := anyKeys(t, 3)
	var held []driver.Lease
	for _, k := range keys {
		held = append(held, mustTry(t, d1, testkit.Request(k, anyTTL)))
	}
	for range 3 {
		l, _, err := d2.AcquireAny(ctxFor(t), anyReqs(keys...))
		if err == nil {
			_ = l.Release(ctxFor(t))
			t.Fatal("AcquireAny succeeded with every key held")
		}
		if !errors.Is(err, driver.ErrLocked) {
			t.Fatalf("AcquireAny with every key held: %v, want ErrLocked", err)
		}
	}
	for _, k := range keys {
		if n := sessionsHolding(t, admin, KeyID(k)); n != 1 {
			t.Fatalf("%d sessions hold %q, want its one holder", n, k)
		}
	}
	if dials := d2.sessions.dials.Load(); dials != 1 {
		t.Fatalf("%d connections made for three refused AcquireAny, want the one kept", dials)
	}
	for _, l := range held {
		mustRelease(t, l)
	}
	// Its one connection holds nothing: every key is free to it now.
	l, i, err := d2.AcquireAny(ctxFor(t), anyReqs(keys[2], keys[1]))
	if err != nil || i != 0 {
		t.Fatalf("AcquireAny after the holders left: request %d, %v; want 0", i, err)
	}
	mustRelease(t, l)
}

// A key held by an owner group is passed over, as a plain try finds it
// locked: the lock itself, free, is given back within the statement, and
// the next key is taken.
func TestAcquireAnyPassesOwnerGroups(t *testing.T) {
	noLeaks(t)
	admin := rawConn(t)
	d1, d2 := newTestDriver(t), newTestDriver(t)
	keys := anyKeys(t, 2)
	group := mustTry(t, d1, ownerReq(keys[0], "owner-1", driver.Exclusive, anyTTL))
	l, i, err := d2.AcquireAny(ctxFor(t), anyReqs(keys...))
	if err != nil || i != 1 {
		t.Fatalf("AcquireAny with an owner group on the first key: request %d, %v; want 1", i, err)
	}
	if n := sessionsHolding(t, admin, KeyID(keys[0])); n != 0 {
		t.Fatalf("%d sessions hold the owner group's key: AcquireAny kept a lock it passed over", n)
	}
	mustRelease(t, l)
	mustRelease(t, group)
}

// Requests the statement does not take (shared ones here) are tried one
// Acquire at a time, with the same outcome.
func TestAcquireAnyOtherRequests(t *testing.T) {
	noLeaks(t)
	d1, d2 := newTestDriver(t), newTestDriver(t)
	keys := anyKeys(t, 2)
	h := mustTry(t, d1, testkit.Request(keys[0], anyTTL))
	l, i, err := d2.AcquireAny(ctxFor(t), []driver.Request{sharedReq(keys[0], anyTTL), sharedReq(keys[1], anyTTL)})
	if err != nil || i != 1 {
		t.Fatalf("AcquireAny of shared requests: request %d, %v; want 1", i, err)
	}
	mustRelease(t, mustTry(t, d1, sharedReq(keys[1], anyTTL)))
	mustRelease(t, l)
	mustRelease(t, h)
}

// An AcquireAny whose context ends while its statement runs, after the
// grant, returns ctx's error, and the grant does not outlive the call's
// session. The statement is held up after the grant by keeping the fencing
// sequence locked (ALTER SEQUENCE, in an open transaction, conflicts with
// nextval), so the cancellation surely meets a granted lock.
func TestAcquireAnyCancelledAfterGrant(t *testing.T) {
	noLeaks(t)
	admin, blocker := rawConn(t), rawConn(t)
	d := newTestDriver(t)
	keys := anyKeys(t, 2)
	mustRelease(t, mustTry(t, d, testkit.Request(testkit.Key(t), anyTTL))) // migrated, one connection
	queryText(t, blocker, "BEGIN; ALTER SEQUENCE public.dlock_fence INCREMENT BY 1; SELECT 'blocking'")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type outcome struct {
		l   driver.Lease
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		l, _, err := d.AcquireAny(ctx, anyReqs(keys...))
		done <- outcome{l, err}
	}()
	// The grant appears in pg_locks; the statement then waits for the
	// sequence. Only then is its context cancelled.
	waitFor(t, "AcquireAny's grant", func() bool { return sessionsHolding(t, admin, KeyID(keys[0])) == 1 })
	cancel()
	select {
	case o := <-done:
		if !errors.Is(o.err, context.Canceled) {
			if o.l != nil {
				_ = o.l.Release(ctxFor(t))
			}
			t.Fatalf("AcquireAny cancelled after its grant: %v, want context.Canceled", o.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("AcquireAny did not return within 10 s of its context's end")
	}
	queryText(t, blocker, "ROLLBACK; SELECT 'done'")
	// Its connection was closed: the server ends the session (and its lock)
	// once the statement, free to finish now, finds no client.
	waitFor(t, "the end of the cancelled grant", func() bool { return sessionsHolding(t, admin, KeyID(keys[0])) == 0 })
	l, i, err := d.AcquireAny(ctxFor(t), anyReqs(keys...))
	if err != nil || i != 0 {
		t.Fatalf("AcquireAny after the cancelled one: request %d, %v; want 0", i, err)
	}
	mustRelease(t, l)
}

// waitFor polls cond (a query of the server's state) until it holds, for at
// most 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not seen within 10 s", what)
		}
		time.Sleep(10 * time.Millisecond) // between polls of the server
	}
}

// countingConn counts the writes of a connection: each is one message
// batch sent to the server, so one round trip for the driver's statements.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// countingDriver returns a Driver whose connections count their writes in
// writes.
func countingDriver(t *testing.T, writes *atomic.Int64) *Driver {
	t.Helper()
	server.Need(t)
	cfg, err := pgconn.ParseConfig(server.URL)
	if err != nil {
		t.Fatal(err)
	}
	dial := cfg.DialFunc
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{Conn: c, writes: writes}, nil
	}
	// Idle connections are kept for the whole test, so that no new
	// connection's setup counts.
	return testkit.Closing(t, "NewFromConfig", func() (*Driver, error) { return NewFromConfig(cfg, WithMaxIdleTime(time.Hour)) })
}

// withoutAny hides the Driver's AnyAcquirer, so that the core tries a
// semaphore's permits one request at a time, for comparison.
type withoutAny struct{ *Driver }

func (w withoutAny) Capabilities() driver.Capabilities {
	c := w.Driver.Capabilities()
	c.AnyAcquirer = nil
	return c
}

// TryAcquire of a semaphore of 4 permits, 3 of them held, takes the free
// one in one statement: one round trip on its idle connection, where a
// client without AnyAcquirer makes one per permit it tries (from 1 to 4,
// from a random permit on).
func TestSemaphoreTryAcquireOneStatement(t *testing.T) {
	noLeaks(t)
	admin := rawConn(t)
	var writes, writesEach atomic.Int64
	holder := testkit.Client(t, newTestDriver(t))
	anyClient := testkit.Client(t, countingDriver(t, &writes))
	eachClient := testkit.Client(t, withoutAny{countingDriver(t, &writesEach)})
	key := testkit.Key(t)
	sem := func(c *dlock.Client) dlock.Semaphore {
		s, err := c.Semaphore(key, 4, dlock.WithTTL(anyTTL))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	semAny, semEach, semHolder := sem(anyClient), sem(eachClient), sem(holder)

	// Each client makes its connection and prepares its statements first,
	// with every permit free.
	for _, s := range []dlock.Semaphore{semAny, semEach} {
		for range 4 { // every permit tried at least once by semEach, most likely
			l, err := s.TryAcquire(ctxFor(t))
			if err != nil {
				t.Fatalf("warm-up TryAcquire: %v", err)
			}
			if err := l.Unlock(ctxFor(t)); err != nil {
				t.Fatal(err)
			}
		}
	}

	const rounds = 8
	var each []int64
	for range rounds {
		var held []dlock.Lease
		for range 3 {
			l, err := semHolder.TryAcquire(ctxFor(t))
			if err != nil {
				t.Fatalf("holder's TryAcquire: %v", err)
			}
			held = append(held, l)
		}
		for _, c := range []struct {
			s      dlock.Semaphore
			writes *atomic.Int64
			any    bool
		}{{semAny, &writes, true}, {semEach, &writesEach, false}} {
			before := c.writes.Load()
			l, err := c.s.TryAcquire(ctxFor(t))
			if err != nil {
				t.Fatalf("TryAcquire with one permit free: %v", err)
			}
			n := c.writes.Load() - before
			pid := holderOf(t, admin, l.Key())
			if locks := advisoryLocks(t, admin, pid); locks != 1 {
				t.Fatalf("the permit's session holds %d advisory locks, want 1", locks)
			}
			if c.any && n != 1 {
				t.Fatalf("TryAcquire with AnyAcquirer made %d round trips, want 1", n)
			}
			if !c.any {
				each = append(each, n)
			}
			if err := l.Unlock(ctxFor(t)); err != nil {
				t.Fatal(err)
			}
		}
		for _, l := range held {
			if err := l.Unlock(ctxFor(t)); err != nil {
				t.Fatal(err)
			}
		}
	}
	var sum int64
	for _, n := range each {
		sum += n
	}
	t.Logf("TryAcquire, 4 permits, 3 held: 1 round trip with AnyAcquirer; one permit at a time %v (mean %.2f)", each, float64(sum)/rounds)
}
