package memcache

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// newMetaDriver returns a Driver with the selector of the servers of
// rawURL, over a client whose connections w counts (the meta connections
// too: they are dialled with the client's DialContext). One Write is one
// round trip: a pipelined meta round is written at once.
func newMetaDriver(tb testing.TB, w *wire, rawURL string) *Driver {
	tb.Helper()
	mc := w.client(tb, rawURL)
	var sel gomemcache.ServerList
	if err := sel.SetServers(serverAddrs(tb, rawURL)...); err != nil {
		tb.Fatal(err)
	}
	return newTestDriver(tb, mc, WithSelector(&sel))
}

// acquireLease takes key on d directly, for tests that look into the lease.
func acquireLease(tb testing.TB, d *Driver, key, value string) *lease {
	tb.Helper()
	ctx := ctxFor(tb)
	dl, err := d.Acquire(ctx, driver.Request{Key: key, ID: testkit.Key(tb) + "-id", TTL: 15 * time.Second, Mode: driver.Exclusive, Value: value})
	if err != nil {
		tb.Fatalf("Acquire(%q): %v", key, err)
	}
	return dl.(*lease)
}

// itemHolder returns the request ID the lock item of key names, or "".
func itemHolder(tb testing.TB, mc *gomemcache.Client, key string) string {
	tb.Helper()
	it, err := mc.Get(namesOf(DefaultKeyPrefix, key).lock)
	if errors.Is(err, gomemcache.ErrCacheMiss) {
		return ""
	}
	if err != nil {
		tb.Fatal(err)
	}
	h, _ := parseValue(it.Value)
	return h.id
}

// An uncontended Lock + Unlock through the core costs two round trips with
// the selector known (ms add + ma, then md), tokens still increase, and a
// renewal costs one.
func TestMetaUncontendedRoundTrips(t *testing.T) {
	server.Need(t)
	var w wire
	c := testkit.Client(t, newMetaDriver(t, &w, server.URL), dlock.WithTTL(15*time.Second))
	m := testkit.Mutex(t, c, testkit.Key(t))
	ctx := ctxFor(t)
	var last uint64
	for i := range 5 {
		r0 := w.requests.Load()
		l := testkit.Lock(t, ctx, m)
		if tok := l.Token(); tok <= last {
			t.Fatalf("lock %d: token %d after %d", i, tok, last)
		} else {
			last = tok
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if n := w.requests.Load() - r0; n != 2 {
			t.Fatalf("lock %d: Lock + Unlock took %d round trips, want 2", i, n)
		}
	}
	d := newMetaDriver(t, &w, server.URL)
	l := acquireLease(t, d, testkit.Key(t)+"/extend", "")
	r0 := w.requests.Load()
	if err := l.Extend(ctx, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(ctx, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := w.requests.Load() - r0; n != 3 {
		t.Fatalf("two Extends and a Release took %d round trips, want 3", n)
	}
}

// A lease whose recorded CAS unique is wrong (a lost reply, a write by
// someone else) still releases its own item, by its request ID, and never
// deletes another holder's.
func TestMetaWrongCAS(t *testing.T) {
	server.Need(t)
	var w wire
	d := newMetaDriver(t, &w, server.URL)
	mc := newMC(t)
	ctx := ctxFor(t)

	key := testkit.Key(t)
	l := acquireLease(t, d, key, "")
	last := l.lastWrite()
	if last.c == nil || last.cas == 0 {
		t.Fatalf("the lease knows no CAS unique of its add: %+v", last)
	}
	last.cas += 1000
	l.setLastWrite(last)
	if err := l.Extend(ctx, 15*time.Second); err != nil {
		t.Fatalf("Extend with a wrong CAS: %v", err)
	}
	last = l.lastWrite()
	last.cas += 1000
	l.setLastWrite(last)
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release with a wrong CAS: %v", err)
	}
	if id := itemHolder(t, mc, key); id != "" {
		t.Fatalf("the item survived its Release, held by %q", id)
	}

	// The item expired (deleted here) and another holder took the lock:
	// the first lease's Release and Extend refuse, and leave it alone.
	key = testkit.Key(t) + "/taken"
	a := acquireLease(t, d, key, "")
	if err := mc.Delete(namesOf(DefaultKeyPrefix, key).lock); err != nil {
		t.Fatal(err)
	}
	aw := a.lastWrite()
	b := acquireLease(t, newMetaDriver(t, &w, server.URL), key, "")
	if err := a.Extend(ctx, 15*time.Second); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("Extend of a lock taken by another: %v, want ErrNotHeld", err)
	}
	aw.cas = b.lastWrite().cas + 1 // on a's connection: a compare that fails
	a.setLastWrite(aw)
	if err := a.Release(ctx); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("Release of a lock taken by another: %v, want ErrNotHeld", err)
	}
	if id := itemHolder(t, mc, key); id != b.id {
		t.Fatalf("the lock is held by %q, want %q", id, b.id)
	}
}

// A lost reply to the add: the retried add finds our own item, the grant
// stands without a known CAS unique, and Release removes it by its ID.
func TestMetaLostAddReply(t *testing.T) {
	server.Need(t)
	var w wire
	d := newMetaDriver(t, &w, server.URL)
	mc := newMC(t)
	ctx := ctxFor(t)
	key := testkit.Key(t)
	// Warm the pool so that the add goes on a pooled connection, which
	// the driver retries on when it breaks.
	acquireLease(t, d, key+"/warm", "")
	w.arm("ms", (*wireConn).breakAfterReply)
	l := acquireLease(t, d, key, "v")
	if w.armed() {
		t.Fatal("the add was not interfered with")
	}
	if l.Token() == 0 {
		t.Fatal("no token")
	}
	if id := itemHolder(t, mc, key); id != l.id {
		t.Fatalf("held by %q, want %q", id, l.id)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if id := itemHolder(t, mc, key); id != "" {
		t.Fatalf("the item survived its Release, held by %q", id)
	}
}

// A restart starts the server's CAS uniques again from 1, so a holder's
// remembered CAS unique can name the next holder's item. The lease's
// connection died with the old process, so its Release cannot use it: it
// falls back to the request ID and leaves the new holder's lock alone.
func TestMetaCASAcrossRestart(t *testing.T) {
	rawURL, srv := restartableServer(t)
	var w wire
	a := acquireLease(t, newMetaDriver(t, &w, rawURL), "restart", "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	b := acquireLease(t, newMetaDriver(t, &w, rawURL), "restart", "")
	t.Logf("CAS uniques: before the restart %d, after %d", a.lastWrite().cas, b.lastWrite().cas)
	if err := a.Release(ctx); err != nil && !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("Release after a restart: %v", err)
	}
	if id := itemHolder(t, newMCAt(t, rawURL), "restart"); id != b.id {
		t.Fatalf("the lock is held by %q, want the new holder %q", id, b.id)
	}
}

// With two servers, a lock whose counter lives on the other server is
// granted in two round trips (ms, then incr) and released in one; one whose
// counter lives with it in one; both work.
func TestMetaTwoServers(t *testing.T) {
	one, _ := restartableServer(t)
	two, _ := restartableServer(t)
	rawURL := one + "," + two[len("memcache://"):]
	var w wire
	d := newMetaDriver(t, &w, rawURL)
	ctx := ctxFor(t)
	seen := map[bool]bool{}
	for i := 0; len(seen) < 2 && i < 200; i++ {
		key := testkit.Key(t) + "/" + strconv.Itoa(i)
		n := namesOf(DefaultKeyPrefix, key)
		la, _ := d.meta.pick(n.lock)
		fa, _ := d.meta.pick(n.fence)
		same := la.String() == fa.String()
		if seen[same] {
			continue
		}
		seen[same] = true
		r0 := w.requests.Load()
		l := acquireLease(t, d, key, "")
		acquired := w.requests.Load() - r0
		if err := l.Release(ctx); err != nil {
			t.Fatalf("same server %v: Release: %v", same, err)
		}
		want := int64(2)
		if same {
			want = 1
		}
		if acquired != want || w.requests.Load()-r0 != want+1 {
			t.Fatalf("same server %v: Acquire took %d round trips, Acquire + Release %d; want %d and %d", same, acquired, w.requests.Load()-r0, want, want+1)
		}
	}
	if len(seen) < 2 {
		t.Fatalf("found no key of each kind: %v", seen)
	}
}

// restartableServer starts a memcached container of the test's own,
// terminated when tb ends, and returns its URL and the container.
func restartableServer(tb testing.TB) (string, *testserver.Server) {
	tb.Helper()
	server.NeedFaults(tb) // containers can be started here
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := testserver.StartMemcached(ctx)
	if err != nil {
		tb.Fatalf("start a memcached: %v", err)
	}
	tb.Cleanup(func() {
		if err := srv.Terminate(context.Background()); err != nil {
			tb.Error(err)
		}
	})
	return "memcache://" + srv.Addr(), srv
}
