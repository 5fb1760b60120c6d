package redis

import (
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

// Tests of the lock hash's scripts (scripts.go), edge case by edge case, at
// the driver level, against the real server.

func reqOf(key string, ttl time.Duration, mode driver.Mode, owner string) driver.Request {
	return driver.Request{Key: key, ID: testkit.NewID(), TTL: ttl, Mode: mode, Owner: owner}
}

// expectRefused checks that req is refused with a LockedError and returns
// its RetryAfter.
func expectRefused(t *testing.T, d *Driver, req driver.Request, why string) time.Duration {
	t.Helper()
	l, err := d.Acquire(ctxFor(t), req)
	if err == nil {
		_ = l.Release(ctxFor(t))
		t.Fatalf("%s %q (owner %q) was granted: %s", req.Mode, req.Key, req.Owner, why)
	}
	le, ok := errors.AsType[*driver.LockedError](err)
	if !ok {
		t.Fatalf("%s %q (owner %q): got %v, want a LockedError: %s", req.Mode, req.Key, req.Owner, err, why)
	}
	return le.RetryAfter
}

func mustRelease(t *testing.T, l driver.Lease) {
	t.Helper()
	if err := l.Release(ctxFor(t)); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// subscribed returns a subscription to key's releases that has taken effect.
func subscribed(t *testing.T, d *Driver, key string) driver.Subscription {
	t.Helper()
	s, err := d.Subscribe(ctxFor(t), key)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if !waken(s, 5*time.Second) {
		t.Fatal("no wake-up when the subscription took effect")
	}
	return s
}

func pttl(t *testing.T, rdb *goredis.Client, key string) time.Duration {
	t.Helper()
	d, err := rdb.PTTL(ctxFor(t), namesOf(DefaultKeyPrefix, key).lock).Result()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Reentrancy (002/003's owner → count, one field per entry): the same owner
// enters again from any client with the same token, every entry is a hold
// of its own, strangers are refused, and only the last release frees the
// lock and wakes waiters.
func TestReentrantEntries(t *testing.T) {
	rdb := newRDB(t)
	d1, d2 := newTestDriver(t, rdb), newTestDriver(t, newRDB(t))
	waiter := newTestDriver(t, newRDB(t))
	key := testkit.Key(t)
	sub := subscribed(t, waiter, key)

	e1 := mustAcquire(t, d1, reqOf(key, 2*time.Second, driver.Exclusive, "owner-a"))
	e2 := mustAcquire(t, d2, reqOf(key, 20*time.Second, driver.Exclusive, "owner-a"))
	e3 := mustAcquire(t, d1, reqOf(key, time.Second, driver.Exclusive, "owner-a"))
	if e2.Token() != e1.Token() || e3.Token() != e1.Token() {
		t.Fatalf("entries' tokens %d, %d, %d: want one token", e1.Token(), e2.Token(), e3.Token())
	}
	holds := holdsOf(t, rdb, DefaultKeyPrefix, key)
	if len(holds) != 3 {
		t.Fatalf("%d holds after three entries, want 3", len(holds))
	}
	for id, h := range holds {
		if h.owner != "owner-a" || h.token != e1.Token() {
			t.Errorf("hold %s = %+v, want owner-a with token %d", id, h, e1.Token())
		}
	}
	// The key lives as long as its latest entry.
	if ttl := pttl(t, rdb, key); ttl <= 10*time.Second {
		t.Errorf("PTTL with a 20 s entry = %v", ttl)
	}
	for _, req := range []driver.Request{
		reqOf(key, time.Second, driver.Exclusive, "owner-b"),
		reqOf(key, time.Second, driver.Exclusive, ""),
		reqOf(key, time.Second, driver.Shared, "owner-a"), // another mode is not a re-entry
		reqOf(key, time.Second, driver.Shared, ""),
	} {
		if after := expectRefused(t, d2, req, "owner-a holds the lock"); after <= 10*time.Second {
			t.Errorf("RetryAfter %v, want the latest entry's time left", after)
		}
	}

	// A stranger's release (an ID that holds nothing) changes nothing.
	n := namesOf(DefaultKeyPrefix, key)
	if ok, err := release(ctxFor(t), rdb, n, testkit.NewID(), "PUBLISH"); ok || err != nil {
		t.Fatalf("stranger's release: %v, %v; want nothing released", ok, err)
	}
	if got := len(holdsOf(t, rdb, DefaultKeyPrefix, key)); got != 3 {
		t.Fatalf("%d holds after a stranger's release, want 3", got)
	}

	mustRelease(t, e1)
	mustRelease(t, e3)
	if waken(sub, 100*time.Millisecond) {
		t.Fatal("releasing an entry while another remains woke the waiters")
	}
	expectRefused(t, d2, reqOf(key, time.Second, driver.Exclusive, "owner-b"), "one entry of owner-a remains")
	if err := e1.Release(ctxFor(t)); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("second release of an entry: got %v, want ErrNotHeld", err)
	}
	mustRelease(t, e2)
	if !waken(sub, 5*time.Second) {
		t.Fatal("the last entry's release did not wake the waiters")
	}
	if typ, _ := rdb.Type(ctxFor(t), n.lock).Result(); typ != "none" {
		t.Fatalf("the lock key is a %s after every entry left, want none", typ)
	}
	mustRelease(t, mustAcquire(t, d2, reqOf(key, time.Second, driver.Exclusive, "owner-b")))
}

// Each entry expires on its own: a leaked entry does not keep the lock
// held, and the entries that are renewed do.
func TestReentrantEntryExpiresAlone(t *testing.T) {
	rdb := newRDB(t)
	d := newTestDriver(t, rdb)
	key := testkit.Key(t)
	leaked := mustAcquire(t, d, reqOf(key, 30*time.Millisecond, driver.Exclusive, "owner-a"))
	kept := mustAcquire(t, d, reqOf(key, 10*time.Second, driver.Exclusive, "owner-a"))
	waitServer(t, "the leaked entry to expire", func() bool { return holders(t, d, key) == 1 })
	if err := leaked.Extend(ctxFor(t), time.Second); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("Extend of an expired entry: got %v, want ErrNotHeld", err)
	}
	expectRefused(t, d, reqOf(key, time.Second, driver.Exclusive, "owner-b"), "the kept entry still holds the lock")
	if err := kept.Extend(ctxFor(t), 10*time.Second); err != nil {
		t.Fatalf("Extend of the live entry: %v", err)
	}
	if err := leaked.Release(ctxFor(t)); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("Release of the expired entry: got %v, want ErrNotHeld", err)
	}
	if holds := holdsOf(t, rdb, DefaultKeyPrefix, key); len(holds) != 1 {
		t.Fatalf("holds after the expired entry was pruned: %v, want the kept one only", holds)
	}
	mustRelease(t, kept)
}

// Readers each have a hold of their own (004's single `read` field fixed):
// they share the lock, renew and expire independently, keep writers out
// until the last leaves, and only the last one's release wakes waiters.
func TestReadersEachHaveAHold(t *testing.T) {
	rdb := newRDB(t)
	d1, d2 := newTestDriver(t, rdb), newTestDriver(t, newRDB(t))
	key := testkit.Key(t)
	sub := subscribed(t, newTestDriver(t, newRDB(t)), key)

	// The first reader's hold must outlast two more grants and the count
	// of holds, a few round trips that take far more than 30 ms on a loaded
	// machine, and then lapse while the test waits for it.
	r1 := mustAcquire(t, d1, reqOf(key, 2*time.Second, driver.Shared, ""))
	r2 := mustAcquire(t, d2, reqOf(key, 10*time.Second, driver.Shared, ""))
	r3 := mustAcquire(t, d2, reqOf(key, 10*time.Second, driver.Shared, ""))
	if r2.Token() <= r1.Token() || r3.Token() <= r2.Token() {
		t.Errorf("readers' tokens %d, %d, %d: want each grant's own, rising", r1.Token(), r2.Token(), r3.Token())
	}
	if got := len(holdsOf(t, rdb, DefaultKeyPrefix, key)); got != 3 {
		t.Fatalf("%d holds for three readers, want 3", got)
	}
	// The first reader's lease lapses alone.
	waitServer(t, "the first reader's hold to expire", func() bool { return holders(t, d1, key) == 2 })
	if err := r1.Extend(ctxFor(t), time.Second); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("Extend of the expired reader: got %v, want ErrNotHeld", err)
	}
	if err := r2.Extend(ctxFor(t), 10*time.Second); err != nil {
		t.Fatalf("the second reader's Extend after the first expired: %v", err)
	}
	expectRefused(t, d1, reqOf(key, time.Second, driver.Exclusive, ""), "two readers are inside")
	mustRelease(t, r2)
	if waken(sub, 100*time.Millisecond) {
		t.Fatal("a reader's release woke the waiters while another reader is inside")
	}
	expectRefused(t, d1, reqOf(key, time.Second, driver.Exclusive, ""), "the third reader is inside")
	mustRelease(t, r3)
	if !waken(sub, 5*time.Second) {
		t.Fatal("the last reader's release did not wake the waiters")
	}
	w := mustAcquire(t, d1, reqOf(key, time.Second, driver.Exclusive, ""))
	if w.Token() <= r3.Token() {
		t.Errorf("writer's token %d not above the readers' %d", w.Token(), r3.Token())
	}
	if after := expectRefused(t, d2, reqOf(key, time.Second, driver.Shared, ""), "a writer holds the lock"); after <= 0 || after > time.Second {
		t.Errorf("reader's RetryAfter behind a writer = %v, want the writer's time left", after)
	}
	mustRelease(t, w)
}

// Writer preference: a writer refused because of readers marks the lock, and
// new readers queue behind it, except re-entries of owners that already
// read; the writer's grant clears the mark; an abandoned mark lapses.
func TestWaitingWriterHoldsOffNewReaders(t *testing.T) {
	rdb := newRDB(t)
	d1, d2 := newTestDriver(t, rdb), newTestDriver(t, newRDB(t))
	key := testkit.Key(t)
	n := namesOf(DefaultKeyPrefix, key)
	const ttl = 300 * time.Millisecond // the writer's: its mark lasts as long

	r := mustAcquire(t, d1, reqOf(key, 10*time.Second, driver.Shared, "reader-a"))
	after := expectRefused(t, d2, reqOf(key, ttl, driver.Exclusive, ""), "a reader is inside")
	if after <= 0 || after > ttl/3+time.Millisecond {
		t.Errorf("writer's RetryAfter behind readers = %v, want at most a third of its mark (%v)", after, ttl/3)
	}
	if mark, err := rdb.HGet(ctxFor(t), n.lock, "wait").Result(); err != nil || mark == "" {
		t.Fatalf("no wait mark after a writer was refused by readers: %q, %v", mark, err)
	}
	if after := expectRefused(t, d1, reqOf(key, time.Second, driver.Shared, ""), "a writer waits"); after <= 0 || after > ttl {
		t.Errorf("new reader's RetryAfter behind a waiting writer = %v, want the mark's time left", after)
	}
	again := mustAcquire(t, d1, reqOf(key, time.Second, driver.Shared, "reader-a")) // re-entry passes
	if again.Token() != r.Token() {
		t.Errorf("reader re-entry token %d, want %d", again.Token(), r.Token())
	}
	mustRelease(t, again)
	mustRelease(t, r)

	w := mustAcquire(t, d2, reqOf(key, ttl, driver.Exclusive, ""))
	if exists, _ := rdb.HExists(ctxFor(t), n.lock, "wait").Result(); exists {
		t.Error("the wait mark survived its writer's grant")
	}
	mustRelease(t, w)
	mustRelease(t, mustAcquire(t, d1, reqOf(key, time.Second, driver.Shared, "")))

	// A writer that gives up leaves a mark that lapses within its window.
	r = mustAcquire(t, d1, reqOf(key, 10*time.Second, driver.Shared, ""))
	expectRefused(t, d2, reqOf(key, ttl, driver.Exclusive, ""), "a reader is inside")
	refused := time.Now()
	var late driver.Lease
	waitServer(t, "an abandoned wait mark to lapse", func() bool {
		var err error
		late, err = d1.Acquire(ctxFor(t), reqOf(key, time.Second, driver.Shared, ""))
		return err == nil
	})
	if waited := time.Since(refused); waited > ttl+time.Second {
		t.Errorf("new readers were held off %v by an abandoned mark of %v", waited, ttl)
	}
	mustRelease(t, late)
	mustRelease(t, r)
}

// Through the core: a stream of overlapping readers cannot starve a writer.
func TestWriterNotStarvedByReaders(t *testing.T) {
	rdb := newRDB(t)
	newClient := func() *dlock.Client {
		c := testkit.Client(t, newTestDriver(t, newRDB(t)), dlock.WithTTL(2*time.Second))
		return c
	}
	key := testkit.Key(t)
	readers, writer := newClient(), newClient()
	rw := testkit.RWMutex(t, readers, key)
	wm := testkit.Mutex(t, writer, key)
	inside, err := rw.RLock(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := wm.Lock(ctxFor(t))
		if err == nil {
			err = l.Unlock(ctxFor(t))
		}
		got <- err
	}()
	n := namesOf(DefaultKeyPrefix, key)
	waitServer(t, "the waiting writer's mark", func() bool {
		ok, _ := rdb.HExists(ctxFor(t), n.lock, "wait").Result()
		return ok
	})
	// Readers keep arriving while one is always inside: each new one is
	// refused, so the writer gets in once the reader inside leaves.
	for i := range 3 {
		if l, err := rw.TryRLock(ctxFor(t)); !errors.Is(err, dlock.ErrLocked) {
			if err == nil {
				_ = l.Unlock(ctxFor(t))
			}
			t.Fatalf("reader %d while a writer waits: got %v, want ErrLocked", i, err)
		}
	}
	if err := inside.Unlock(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("writer: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the writer did not get the lock after the reader inside left")
	}
}

// A reentrant owner cannot take another mode than the one it holds: no
// upgrade from read to write (it would wait for itself), no downgrade.
func TestNoUpgradeOrDowngrade(t *testing.T) {
	d := newTestDriver(t, newRDB(t))
	key := testkit.Key(t)
	r := mustAcquire(t, d, reqOf(key, 5*time.Second, driver.Shared, "o"))
	expectRefused(t, d, reqOf(key, time.Second, driver.Exclusive, "o"), "the owner reads")
	mustRelease(t, r)
	w := mustAcquire(t, d, reqOf(key, 5*time.Second, driver.Exclusive, "o"))
	expectRefused(t, d, reqOf(key, time.Second, driver.Shared, "o"), "the owner writes")
	mustRelease(t, w)
}

// Whatever is at the lock's name that is not a lock of this layout is a
// stranger's lock: refused with its PTTL, never extended, released or
// overwritten.
func TestForeignValuesAreStrangersLocks(t *testing.T) {
	rdb := newRDB(t)
	d := newTestDriver(t, rdb)
	ctx := ctxFor(t)
	for name, write := range map[string]func(string) error{
		"string (older driver)": func(k string) error { return rdb.Set(ctx, k, testkit.NewID(), time.Minute).Err() },
		"list":                  func(k string) error { return rdb.RPush(ctx, k, "x").Err() },
		"hash of another shape": func(k string) error { return rdb.HSet(ctx, k, "owner", "x").Err() },
		"hold that does not parse": func(k string) error {
			return rdb.HSet(ctx, k, "mode", "x", "h:"+testkit.NewID(), "soon").Err()
		},
		"holds without a mode": func(k string) error {
			return rdb.HSet(ctx, k, "h:"+testkit.NewID(), "99999999999999 1 ").Err()
		},
	} {
		key := testkit.Key(t)
		n := namesOf(DefaultKeyPrefix, key)
		if err := write(n.lock); err != nil {
			t.Fatal(err)
		}
		before, _ := rdb.Dump(ctx, n.lock).Result()
		for _, mode := range []driver.Mode{driver.Exclusive, driver.Shared} {
			expectRefused(t, d, reqOf(key, time.Second, mode, ""), name)
		}
		if ok, err := extend(ctx, rdb, n, testkit.NewID(), time.Minute); ok || err != nil {
			t.Errorf("%s: extend: %v, %v", name, ok, err)
		}
		if ok, err := release(ctx, rdb, n, testkit.NewID(), "PUBLISH"); ok || err != nil {
			t.Errorf("%s: release: %v, %v", name, ok, err)
		}
		if after, _ := rdb.Dump(ctx, n.lock).Result(); after != before {
			t.Errorf("%s: the stranger's value changed", name)
		}
		info, err := d.Inspect(ctx, key)
		if err != nil || !info.Held {
			t.Errorf("%s: Inspect = %+v, %v; want held", name, info, err)
		}
		_ = rdb.Del(ctx, n.lock)
	}
}

// Inspect tells modes, holders and owners apart.
func TestInspectModes(t *testing.T) {
	d := newTestDriver(t, newRDB(t))
	ctx := ctxFor(t)
	key := testkit.Key(t)
	r1 := mustAcquire(t, d, reqOf(key, time.Minute, driver.Shared, "alice"))
	if info, err := d.Inspect(ctx, key); err != nil || info.Mode != driver.Shared || info.Holders != 1 || info.Owner != "alice" || info.Token != r1.Token() {
		t.Errorf("one reader: %+v, %v", info, err)
	}
	r2 := mustAcquire(t, d, reqOf(key, time.Minute, driver.Shared, ""))
	if info, err := d.Inspect(ctx, key); err != nil || info.Holders != 2 || info.Owner != "" || info.Token != r2.Token() || info.TTL <= 0 {
		t.Errorf("two readers: %+v, %v", info, err)
	}
	mustRelease(t, r1)
	mustRelease(t, r2)
	info, err := d.Inspect(ctx, key)
	if err != nil || info.Held || info.Token != r2.Token() {
		t.Errorf("free after readers: %+v, %v; want the latest token %d", info, err, r2.Token())
	}
	e1 := mustAcquire(t, d, reqOf(key, time.Minute, driver.Exclusive, "bob"))
	mustAcquire(t, d, reqOf(key, time.Minute, driver.Exclusive, "bob"))
	if info, err := d.Inspect(ctx, key); err != nil || info.Mode != driver.Exclusive || info.Holders != 2 || info.Owner != "bob" || info.Token != e1.Token() {
		t.Errorf("two entries of bob: %+v, %v", info, err)
	}
}

// holders returns the number of live holds of key's lock, from Inspect.
func holders(t *testing.T, d *Driver, key string) int {
	t.Helper()
	info, err := d.Inspect(ctxFor(t), key)
	if err != nil {
		t.Fatal(err)
	}
	return info.Holders
}

// waitServer polls the server (through cond) until cond holds: for
// expiries, which nothing notifies.
func waitServer(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within 10 s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling the server
	}
}
