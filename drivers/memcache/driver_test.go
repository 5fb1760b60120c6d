package memcache

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

// testTTL is the TTL of the tests below: the driver's minimum.
const testTTL = MinTTL

// reqFor returns a request for key with the tests' TTL.
func reqFor(key string) driver.Request { return testkit.Request(key, testTTL) }

// mustAcquire takes req on d or fails t.
func mustAcquire(t *testing.T, d *Driver, req driver.Request) driver.Lease {
	t.Helper()
	return testkit.MustAcquire(t, ctxFor(t), d, req)
}

// holderOf returns the request ID the lock item of key names ("" when there
// is no item) and the expiry it announces.
func holderOf(t *testing.T, mc *gomemcache.Client, key string) (string, time.Time) {
	t.Helper()
	it, err := mc.Get(namesOf(DefaultKeyPrefix, key).lock)
	if errors.Is(err, gomemcache.ErrCacheMiss) {
		return "", time.Time{}
	}
	if err != nil {
		t.Fatalf("get lock item of %q: %v", key, err)
	}
	h, ok := parseValue(it.Value)
	if !ok {
		t.Fatalf("lock item of %q holds %q, not a dlock value", key, it.Value)
	}
	return h.id, h.expires
}

// expire removes the lock item of key behind its holder's back, as its
// expiry (or an eviction) would.
func expire(t *testing.T, mc *gomemcache.Client, key string) {
	t.Helper()
	if err := mc.Delete(namesOf(DefaultKeyPrefix, key).lock); err != nil {
		t.Fatalf("delete lock item of %q: %v", key, err)
	}
}

func TestAcquireLocked(t *testing.T) {
	mc := newMC(t)
	d1, d2 := newTestDriver(t, mc), newTestDriver(t, newMC(t))
	key := testkit.Key(t)
	req := reqFor(key)
	before := time.Now()
	l := mustAcquire(t, d1, req)
	if want := 2900 * time.Millisecond; l.Token() == 0 || l.Validity() != want {
		t.Fatalf("lease: token %d validity %v, want a token and %v (5 s less 2.1 s for memcached's clock)", l.Token(), l.Validity(), want)
	}
	id, expires := holderOf(t, mc, key)
	if id != req.ID || expires.Before(before.Add(testTTL-time.Second)) || expires.After(time.Now().Add(testTTL+time.Second)) {
		t.Fatalf("lock item names %q expiring at %v, want %q expiring about %v from now", id, expires, req.ID, testTTL)
	}

	_, err := d2.Acquire(ctxFor(t), reqFor(key))
	le, ok := errors.AsType[*driver.LockedError](err)
	if !errors.Is(err, driver.ErrLocked) || !ok {
		t.Fatalf("second Acquire: got %v, want a *LockedError", err)
	}
	if le.RetryAfter <= 0 || le.RetryAfter > testTTL+time.Second {
		t.Fatalf("RetryAfter = %v, want the holder's expected remaining time, in (0, %v]", le.RetryAfter, testTTL)
	}
	if id, _ := holderOf(t, mc, key); id != req.ID {
		t.Fatalf("after the refused Acquire the lock item names %q, want %q", id, req.ID)
	}
	if err := l.Release(ctxFor(t)); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if id, _ := holderOf(t, mc, key); id != "" {
		t.Fatalf("after Release the lock item names %q", id)
	}
	if err := l.Release(ctxFor(t)); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("second Release: got %v, want ErrNotHeld", err)
	}
	if err := l.Extend(ctxFor(t), testTTL); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("Extend after Release: got %v, want ErrNotHeld", err)
	}
	l2 := mustAcquire(t, d2, reqFor(key))
	if l2.Token() <= l.Token() {
		t.Fatalf("token after a release %d, not above %d", l2.Token(), l.Token())
	}
	_ = l2.Release(ctxFor(t))
}

// Release is a compare-and-delete: the item is gone for add at once (not a
// tombstone), and nothing else on the server is touched.
func TestReleaseFreesAtOnce(t *testing.T) {
	mc := newMC(t)
	d := newTestDriver(t, mc)
	key := testkit.Key(t)
	sentinel := &gomemcache.Item{Key: "sentinel-" + testkit.NewID(), Value: []byte("keep me"), Expiration: 60}
	if err := mc.Set(sentinel); err != nil {
		t.Fatal(err)
	}
	l := mustAcquire(t, d, reqFor(key))
	if err := l.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	name := namesOf(DefaultKeyPrefix, key).lock
	if err := mc.Add(&gomemcache.Item{Key: name, Value: []byte("x"), Expiration: 5}); err != nil {
		t.Fatalf("add of the released lock item: %v, want it free at once", err)
	}
	if err := mc.Delete(name); err != nil {
		t.Fatal(err)
	}
	if it, err := mc.Get(sentinel.Key); err != nil || string(it.Value) != "keep me" {
		t.Fatalf("another item after a release: %v %v", it, err)
	}
}

// A failed attempt costs one request once the holder's expiry is known and,
// for a waiting Lock's attempt (driver.Request.Wait), the waiter's place in
// line is near. A waiting attempt's first one reads the item to learn the
// expiry and takes a ticket (two requests, incr and the add that starts the
// counter, since nobody waited before), the second reads the counters
// (queue.go). An attempt without Wait (a TryLock) takes no ticket: the
// first reads the item, the others cost their add alone.
func TestFailedAttemptCost(t *testing.T) {
	holder := newTestDriver(t, newMC(t))
	key := testkit.Key(t)
	l := mustAcquire(t, holder, reqFor(key))
	defer l.Release(ctxFor(t))

	for _, c := range []struct {
		wait bool
		want []int64
	}{
		{false, []int64{2, 1, 1, 1}},
		{true, []int64{4, 2, 1, 1}},
	} {
		var w wire
		waiter := newTestDriver(t, w.client(t, server.URL))
		var firstHint time.Duration
		for i, want := range c.want {
			req := reqFor(key)
			req.Wait = c.wait
			before := w.requests.Load()
			_, err := waiter.Acquire(ctxFor(t), req)
			le, ok := errors.AsType[*driver.LockedError](err)
			if !ok || le.RetryAfter <= 0 {
				t.Fatalf("wait %v, attempt %d: got %v, want a LockedError with RetryAfter", c.wait, i, err)
			}
			if i == 0 {
				firstHint = le.RetryAfter
			} else if le.RetryAfter > firstHint {
				t.Fatalf("wait %v, attempt %d: RetryAfter %v grew from %v", c.wait, i, le.RetryAfter, firstHint)
			}
			if got := w.requests.Load() - before; got != want {
				t.Fatalf("wait %v, attempt %d cost %d requests, want %d", c.wait, i, got, want)
			}
		}
	}
}

func TestTokens(t *testing.T) {
	mc := newMC(t)
	drivers := []*Driver{newTestDriver(t, mc), newTestDriver(t, newMC(t))}
	key := testkit.Key(t)
	n := namesOf(DefaultKeyPrefix, key)
	var last uint64
	grant := func(i int) driver.Lease {
		t.Helper()
		l := mustAcquire(t, drivers[i%2], reqFor(key))
		if l.Token() <= last {
			t.Fatalf("grant %d: token %d, not above the previous %d", i, l.Token(), last)
		}
		last = l.Token()
		return l
	}
	start := uint64(time.Now().UnixMicro())
	for i := range 4 {
		if err := grant(i).Release(ctxFor(t)); err != nil {
			t.Fatal(err)
		}
	}
	if last < start {
		t.Fatalf("token %d of a new counter is below the clock %d it starts from", last, start)
	}
	// After an expiry (the item removed as the server would).
	grant(0)
	expire(t, mc, key)
	grant(1).Release(ctxFor(t))

	// After the server lost the counter (a restart, an eviction): it starts
	// again from the clock, above every token issued before.
	if err := mc.Delete(n.fence); err != nil {
		t.Fatal(err)
	}
	grant(0).Release(ctxFor(t))
	// It holds the end of the last grant's block of tokens.
	stored, err := mc.Get(n.fence)
	if want := last + tokenBlock - 1; err != nil || string(stored.Value) != strconv.FormatUint(want, 10) {
		t.Fatalf("fencing counter holds %v (%v), want the end of the last grant's block, %d", stored, err, want)
	}
}

func TestUnusableCounterRefusesGrant(t *testing.T) {
	mc := newMC(t)
	d := newTestDriver(t, mc)
	key := testkit.Key(t)
	n := namesOf(DefaultKeyPrefix, key)
	for _, bad := range []string{"abc", "18446744073709551615", strconv.FormatUint(maxToken, 10)} {
		if err := mc.Set(&gomemcache.Item{Key: n.fence, Value: []byte(bad)}); err != nil {
			t.Fatal(err)
		}
		_, err := d.Acquire(ctxFor(t), reqFor(key))
		if !errors.Is(err, errBadCounter) {
			t.Fatalf("Acquire with counter %q: got %v, want errBadCounter", bad, err)
		}
		if id, _ := holderOf(t, mc, key); id != "" {
			t.Fatalf("Acquire with counter %q left a lock naming %q", bad, id)
		}
	}
}

func TestStaleLeaseLeavesNewHolderAlone(t *testing.T) {
	mc := newMC(t)
	d1, d2 := newTestDriver(t, mc), newTestDriver(t, newMC(t))
	key := testkit.Key(t)
	stale := mustAcquire(t, d1, reqFor(key))
	expire(t, mc, key)
	req := reqFor(key)
	fresh := mustAcquire(t, d2, req)
	_, expires := holderOf(t, mc, key)
	if err := stale.Extend(ctxFor(t), time.Minute); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("stale Extend: got %v, want ErrNotHeld", err)
	}
	if err := stale.Release(ctxFor(t)); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("stale Release: got %v, want ErrNotHeld", err)
	}
	if id, e := holderOf(t, mc, key); id != req.ID || !e.Equal(expires) {
		t.Fatalf("after the stale calls the lock item names %q expiring %v, want %q expiring %v untouched", id, e, req.ID, expires)
	}
	if err := fresh.Extend(ctxFor(t), 20*time.Second); err != nil {
		t.Fatalf("holder's Extend: %v", err)
	}
	if _, e := holderOf(t, mc, key); !e.After(expires.Add(10 * time.Second)) {
		t.Fatalf("after Extend to 20s the item expires %v, want about 20 s from now", e)
	}
	if want := 17900 * time.Millisecond; fresh.Validity() != want {
		t.Fatalf("Validity after Extend to 20s = %v, want %v", fresh.Validity(), want)
	}
	if err := fresh.Release(ctxFor(t)); err != nil {
		t.Fatalf("holder's Release: %v", err)
	}

	// Extend after an expiry does not resurrect the lock.
	l := mustAcquire(t, d1, reqFor(key))
	expire(t, mc, key)
	if err := l.Extend(ctxFor(t), testTTL); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("Extend of an expired lease: got %v, want ErrNotHeld", err)
	}
	if id, _ := holderOf(t, mc, key); id != "" {
		t.Fatalf("Extend of an expired lease resurrected the lock for %q", id)
	}
}

// Extend and Release of one lease may run at once (the core renews while
// the application unlocks): the CAS conflict between them is retried, and
// the lock ends released.
func TestConcurrentExtendAndRelease(t *testing.T) {
	mc := newMC(t)
	d := newTestDriver(t, mc)
	key := testkit.Key(t)
	for i := range 20 {
		l := mustAcquire(t, d, reqFor(key))
		var wg sync.WaitGroup
		var extendErr, releaseErr error
		wg.Go(func() { extendErr = l.Extend(ctxFor(t), testTTL) })
		wg.Go(func() { releaseErr = l.Release(ctxFor(t)) })
		wg.Wait()
		if releaseErr != nil {
			t.Fatalf("round %d: Release: %v", i, releaseErr)
		}
		if extendErr != nil && !errors.Is(extendErr, driver.ErrNotHeld) {
			t.Fatalf("round %d: Extend: %v", i, extendErr)
		}
		if id, _ := holderOf(t, mc, key); id != "" {
			t.Fatalf("round %d: the lock item still names %q", i, id)
		}
	}
}

func TestCancelledContext(t *testing.T) {
	mc := newMC(t)
	d := newTestDriver(t, mc)
	key := testkit.Key(t)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := d.Acquire(ctx, reqFor(key)); err != context.Canceled {
		t.Fatalf("Acquire with a cancelled context: got %v, want exactly context.Canceled", err)
	}
	l := mustAcquire(t, d, reqFor(key))
	if err := l.Extend(ctx, testTTL); err != context.Canceled {
		t.Fatalf("Extend with a cancelled context: got %v, want exactly context.Canceled", err)
	}
	if err := l.Release(ctx); err != context.Canceled {
		t.Fatalf("Release with a cancelled context: got %v, want exactly context.Canceled", err)
	}
	if err := l.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}

	// Cancelled while the add was on the wire: the grant is given back
	// before Acquire returns.
	var w wire
	wd := newTestDriver(t, w.client(t, server.URL))
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	w.arm("add", func(*wireConn) { cancel() })
	if _, err := wd.Acquire(ctx, reqFor(key)); err != context.Canceled {
		t.Fatalf("Acquire cancelled mid-request: got %v, want exactly context.Canceled", err)
	}
	if w.armed() {
		t.Fatal("the hook did not run")
	}
	if id, _ := holderOf(t, mc, key); id != "" {
		t.Fatalf("the cancelled Acquire left a lock naming %q", id)
	}
}

// A request whose connection breaks after the server applied it is sent
// again on a new connection, and each operation recognises its own earlier
// effect instead of failing or leaving a lock behind.
func TestBrokenConnectionAfterApply(t *testing.T) {
	mc := newMC(t)
	var w wire
	d := newTestDriver(t, w.client(t, server.URL))
	key := testkit.Key(t)

	// The add went through, its answer was lost: the resend finds the item
	// named by its own ID, and the grant stands.
	w.arm("add", (*wireConn).breakAfterReply)
	req := reqFor(key)
	l := mustAcquire(t, d, req)
	if w.armed() {
		t.Fatal("the hook did not run")
	}
	if id, _ := holderOf(t, mc, key); id != req.ID {
		t.Fatalf("lock item names %q, want %q", id, req.ID)
	}

	// The same for the cas of an Extend: it is read again and swapped again.
	w.arm("cas", (*wireConn).breakAfterReply)
	if err := l.Extend(ctxFor(t), 2*testTTL); err != nil {
		t.Fatalf("Extend whose first cas lost its answer: %v", err)
	}

	// And of a Release: the item is gone, which is what the release wanted.
	w.arm("cas", (*wireConn).breakAfterReply)
	if err := l.Release(ctxFor(t)); err != nil {
		t.Fatalf("Release whose cas lost its answer: %v", err)
	}
	if id, _ := holderOf(t, mc, key); id != "" {
		t.Fatalf("after the Release the lock item names %q", id)
	}

	// An incr whose answer was lost skips a token, nothing worse.
	w.arm("incr", (*wireConn).breakAfterReply)
	l2 := mustAcquire(t, d, reqFor(key))
	if l2.Token() <= l.Token()+1 {
		t.Fatalf("token after a lost incr answer %d, want above %d", l2.Token(), l.Token()+1)
	}
	_ = l2.Release(ctxFor(t))
}

func TestCloseKeepsCallersClient(t *testing.T) {
	mc := newMC(t)
	d, err := New(mc)
	if err != nil {
		t.Fatal(err)
	}
	key := testkit.Key(t)
	l := mustAcquire(t, d, reqFor(key))
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := mc.Ping(); err != nil {
		t.Fatalf("the caller's client after the Driver's Close: %v", err)
	}
	// Close releases nothing: the lock ends by its TTL.
	if id, _ := holderOf(t, mc, key); id == "" {
		t.Fatal("Close released the lock")
	}
	if _, err := d.Acquire(ctxFor(t), reqFor(key)); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("Acquire after Close: %v", err)
	}
	if err := l.Extend(ctxFor(t), testTTL); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("Extend after Close: %v", err)
	}
	if err := l.Release(ctxFor(t)); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("Release after Close: %v", err)
	}
	expire(t, mc, key)
}

func TestNewRejects(t *testing.T) {
	if _, err := New(nil); err == nil {
		t.Error("New(nil): want an error")
	}
	mc := gomemcache.New("127.0.0.1:1")
	for _, p := range []string{"has space", "tab\t", "\x00", string(make([]byte, 65)), "é"} {
		if _, err := New(mc, WithKeyPrefix(p)); err == nil {
			t.Errorf("WithKeyPrefix(%q): want an error", p)
		}
	}
	if _, err := New(mc, WithKeyPrefix(""), nil); err != nil {
		t.Errorf("WithKeyPrefix(\"\") and a nil option: %v", err)
	}
	d, _ := New(mc)
	for _, req := range []driver.Request{
		{Key: "k", ID: testkit.NewID(), TTL: testTTL, Mode: driver.Shared},
		{Key: "k", ID: testkit.NewID(), TTL: testTTL, Owner: "o"},
	} {
		if _, err := d.Acquire(ctxFor(t), req); !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("Acquire(%+v): got %v, want ErrUnsupported", req, err)
		}
	}
	if _, err := d.Acquire(ctxFor(t), driver.Request{Key: "k", ID: testkit.NewID(), TTL: time.Second}); err == nil {
		t.Error("Acquire with a 1 s TTL: want an error")
	}
}

func TestKeyPrefixSeparatesLocks(t *testing.T) {
	mc := newMC(t)
	a := newTestDriver(t, mc, WithKeyPrefix("app-a:"))
	b := newTestDriver(t, mc, WithKeyPrefix("app-b:"))
	key := testkit.Key(t)
	la := mustAcquire(t, a, reqFor(key))
	lb := mustAcquire(t, b, reqFor(key))
	for _, prefix := range []string{"app-a:", "app-b:"} {
		if _, err := mc.Get(namesOf(prefix, key).lock); err != nil {
			t.Fatalf("lock item under %q: %v", prefix, err)
		}
	}
	for _, l := range []driver.Lease{la, lb} {
		if err := l.Release(ctxFor(t)); err != nil {
			t.Fatal(err)
		}
	}
}

// A lock whose holder vanished is free again within its TTL, not before the
// holder's validity deadline, and the holder's lost signal fires at that
// deadline. (The conformance case of the same name checks this too, but
// its final check races when the lock frees more than a second after the
// deadline, as it does here: see suiteTTL.)
func TestExpiryAfterHolderVanishes(t *testing.T) {
	holder := newTestDriver(t, newMC(t))
	ca := testkit.Client(t, holder, dlock.WithTTL(testTTL))
	cb := testkit.Client(t, newTestDriver(t, newMC(t)), dlock.WithTTL(testTTL))
	key := testkit.Key(t)
	ma, _ := ca.Mutex(key)
	mb, _ := cb.Mutex(key)
	la := testkit.Lock(t, ctxFor(t), ma)
	acquired, deadline := time.Now(), la.Deadline()
	lost := make(chan time.Time, 1)
	go func() {
		<-la.Done()
		lost <- time.Now()
	}()
	_ = holder.Close() // the holder vanishes: nothing is released, renewals fail

	ctx, cancel := context.WithDeadline(context.Background(), acquired.Add(testTTL+time.Second))
	defer cancel()
	lb, err := mb.Lock(ctx)
	if err != nil {
		t.Fatalf("Lock after the holder vanished: got %v, want the lock within the TTL", err)
	}
	granted := time.Now()
	defer lb.Unlock(context.Background())
	if granted.Before(deadline) {
		t.Errorf("the lock was granted again %v before the vanished holder's deadline", deadline.Sub(granted))
	}
	select {
	case at := <-lost:
		if at.Before(deadline) {
			t.Errorf("the lost signal fired %v before the deadline", deadline.Sub(at))
		}
		// Never early; late only by the scheduling of a loaded machine
		// (242 ms seen under make flakes), for which a fifth of the TTL is
		// room enough.
		if late := at.Sub(deadline); late > testTTL/5 {
			t.Errorf("the lost signal fired %v after the deadline", late)
		}
	default:
		t.Fatal("the lock was granted again and the vanished holder has not been told")
	}
	if err := la.Err(); !errors.Is(err, dlock.ErrLockLost) {
		t.Errorf("Err of the vanished holder's lease: %v, want ErrLockLost", err)
	}
	t.Logf("deadline %v after the grant, lock free again after %v",
		deadline.Sub(acquired).Round(time.Millisecond), granted.Sub(acquired).Round(time.Millisecond))
}
