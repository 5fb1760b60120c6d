package redis

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

// mustAcquire takes req on d or fails t.
func mustAcquire(t *testing.T, d *Driver, req driver.Request) driver.Lease {
	t.Helper()
	return testkit.MustAcquire(t, ctxFor(t), d, req)
}

// holderOf returns the request ID of the only hold of key's lock on the
// server ("" when there is none; the value itself when a stranger wrote a
// string there) and the lock key's remaining TTL. It fails the test when the
// lock has several holds.
func holderOf(t *testing.T, rdb *goredis.Client, prefix, key string) (string, time.Duration) {
	t.Helper()
	holds := holdsOf(t, rdb, prefix, key)
	if len(holds) > 1 {
		t.Fatalf("lock of %q has %d holds, want at most one", key, len(holds))
	}
	for id := range holds {
		ttl, err := rdb.PTTL(ctxFor(t), namesOf(prefix, key).lock).Result()
		if err != nil {
			t.Fatalf("PTTL: %v", err)
		}
		return id, ttl
	}
	return "", 0
}

// hold is one h:ID field of a lock hash, decoded.
type hold struct {
	expiry int64 // ms of the server clock
	token  uint64
	owner  string
}

// holdsOf returns the holds stored in key's lock hash, expired ones
// included, by request ID; a stranger's string value is returned as one
// hold named by the value.
func holdsOf(t *testing.T, rdb *goredis.Client, prefix, key string) map[string]hold {
	t.Helper()
	ctx := ctxFor(t)
	n := namesOf(prefix, key)
	typ, err := rdb.Type(ctx, n.lock).Result()
	if err != nil {
		t.Fatalf("TYPE %q: %v", n.lock, err)
	}
	switch typ {
	case "none":
		return nil
	case "string":
		v, err := rdb.Get(ctx, n.lock).Result()
		if err != nil {
			t.Fatalf("GET %q: %v", n.lock, err)
		}
		return map[string]hold{v: {}}
	}
	fields, err := rdb.HGetAll(ctx, n.lock).Result()
	if err != nil {
		t.Fatalf("HGETALL %q: %v", n.lock, err)
	}
	holds := map[string]hold{}
	for f, v := range fields {
		id, ok := strings.CutPrefix(f, "h:")
		if !ok {
			continue
		}
		exp, rest, _ := strings.Cut(v, " ")
		tok, owner, _ := strings.Cut(rest, " ")
		e, err1 := strconv.ParseInt(exp, 10, 64)
		k, err2 := strconv.ParseUint(tok, 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("hold %q = %q does not parse", f, v)
		}
		holds[id] = hold{expiry: e, token: k, owner: owner}
	}
	return holds
}

// waken waits up to d for a value on s's channel.
func waken(s driver.Subscription, d time.Duration) bool {
	select {
	case <-s.C():
		return true
	case <-time.After(d):
		return false
	}
}

func TestAcquireLocked(t *testing.T) {
	rdb := newRDB(t)
	d1, d2 := newTestDriver(t, rdb), newTestDriver(t, newRDB(t))
	key := testkit.Key(t)
	req := testkit.Request(key, 5*time.Second)
	l := mustAcquire(t, d1, req)
	if l.Token() == 0 || l.Validity() != req.TTL {
		t.Fatalf("lease: token %d validity %v, want a token and %v", l.Token(), l.Validity(), req.TTL)
	}
	if id, ttl := holderOf(t, rdb, DefaultKeyPrefix, key); id != req.ID || ttl <= 0 || ttl > req.TTL {
		t.Fatalf("lock key holds %q with TTL %v, want %q with TTL up to %v", id, ttl, req.ID, req.TTL)
	}

	_, err := d2.Acquire(ctxFor(t), testkit.Request(key, time.Second))
	le, ok := errors.AsType[*driver.LockedError](err)
	if !errors.Is(err, driver.ErrLocked) || !ok {
		t.Fatalf("second Acquire: got %v, want a *LockedError", err)
	}
	if le.RetryAfter <= 0 || le.RetryAfter > req.TTL {
		t.Fatalf("RetryAfter = %v, want the holder's remaining TTL, in (0, %v]", le.RetryAfter, req.TTL)
	}
	if id, _ := holderOf(t, rdb, DefaultKeyPrefix, key); id != req.ID {
		t.Fatalf("after the refused Acquire the lock holds %q, want %q", id, req.ID)
	}
	if err := l.Release(ctxFor(t)); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if id, _ := holderOf(t, rdb, DefaultKeyPrefix, key); id != "" {
		t.Fatalf("after Release the lock holds %q", id)
	}
	if err := l.Release(ctxFor(t)); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("second Release: got %v, want ErrNotHeld", err)
	}
}

func TestTokensIncrease(t *testing.T) {
	rdb := newRDB(t)
	drivers := []*Driver{newTestDriver(t, rdb), newTestDriver(t, newRDB(t))}
	key := testkit.Key(t)
	var last uint64
	grant := func(i int) driver.Lease {
		l := mustAcquire(t, drivers[i%2], testkit.Request(key, time.Second))
		if l.Token() <= last {
			t.Fatalf("grant %d: token %d, not above the previous %d", i, l.Token(), last)
		}
		last = l.Token()
		return l
	}
	for i := range 6 {
		if err := grant(i).Release(ctxFor(t)); err != nil {
			t.Fatal(err)
		}
	}
	// After an expiry.
	l := mustAcquire(t, drivers[0], testkit.Request(key, 20*time.Millisecond))
	last = l.Token()
	time.Sleep(60 * time.Millisecond) // let the lock expire on the server
	grant(1)
	if err := rdb.Del(ctxFor(t), namesOf(DefaultKeyPrefix, key).lock).Err(); err != nil {
		t.Fatal(err)
	}

	// After the server lost everything (as a restart without persistence
	// does): the counter restarts from the server clock, above every token
	// issued before.
	n := namesOf(DefaultKeyPrefix, key)
	if err := rdb.Del(ctxFor(t), n.lock, n.fence()).Err(); err != nil {
		t.Fatal(err)
	}
	grant(2).Release(ctxFor(t))

	// The counter is kept without expiry.
	if ttl, err := rdb.PTTL(ctxFor(t), n.fence()).Result(); err != nil || ttl != -1 {
		t.Fatalf("PTTL of the fencing counter = %v (%v), want -1 (no expiry)", ttl, err)
	}
	// It holds the end of the last grant's block of tokens.
	stored, err := rdb.Get(ctxFor(t), n.fence()).Uint64()
	if want := last + tokenBlock - 1; err != nil || stored != want {
		t.Fatalf("fencing counter holds %d (%v), want the end of the last grant's block, %d", stored, err, want)
	}
}

// The acquire script grants again to the same request ID, with the same
// token: that is what makes a go-redis resend, after a connection error that
// lost the first reply, return the grant instead of ErrLocked with the lock
// left behind.
func TestAcquireResendIsGranted(t *testing.T) {
	rdb := newRDB(t)
	n := namesOf(DefaultKeyPrefix, testkit.Key(t))
	for _, mode := range []driver.Mode{driver.Exclusive, driver.Shared} {
		req := driver.Request{Key: "unused", ID: testkit.NewID(), TTL: 5 * time.Second, Mode: mode}
		first, err := acquire(ctxFor(t), rdb, n, req, "", blockFor(req))
		if err != nil {
			t.Fatal(err)
		}
		again, err := acquire(ctxFor(t), rdb, n, req, "", blockFor(req))
		if err != nil {
			t.Fatal(err)
		}
		if !first.ok || !again.ok || again.token != first.token {
			t.Fatalf("%s acquire then resend = %+v, %+v; want one grant, granted twice", mode, first, again)
		}
		if ok, err := release(ctxFor(t), rdb, n, req.ID, "PUBLISH"); !ok || err != nil {
			t.Fatalf("release: %v %v", ok, err)
		}
		if ok, err := release(ctxFor(t), rdb, n, req.ID, "PUBLISH"); ok || err != nil {
			t.Fatalf("second release of a resent grant: %v %v, want nothing released", ok, err)
		}
	}
}

func TestUnusableCounterRefusesGrant(t *testing.T) {
	rdb := newRDB(t)
	d := newTestDriver(t, rdb)
	key := testkit.Key(t)
	n := namesOf(DefaultKeyPrefix, key)
	for _, bad := range []string{"abc", "9007199254740991", "-5", "a hash"} {
		if err := rdb.Del(ctxFor(t), n.fence()).Err(); err != nil {
			t.Fatal(err)
		}
		var err error
		if bad == "a hash" {
			err = rdb.HSet(ctxFor(t), n.fence(), "f", "v").Err()
		} else {
			err = rdb.Set(ctxFor(t), n.fence(), bad, time.Minute).Err()
		}
		if err != nil {
			t.Fatal(err)
		}
		_, err = d.Acquire(ctxFor(t), testkit.Request(key, time.Second))
		if err == nil || errors.Is(err, driver.ErrLocked) {
			t.Fatalf("Acquire with counter %q: got %v, want an error", bad, err)
		}
		if id, _ := holderOf(t, rdb, DefaultKeyPrefix, key); id != "" {
			t.Fatalf("Acquire with counter %q left a lock holding %q", bad, id)
		}
	}
}

func TestStaleLeaseLeavesNewHolderAlone(t *testing.T) {
	rdb := newRDB(t)
	d1, d2 := newTestDriver(t, rdb), newTestDriver(t, newRDB(t))
	key := testkit.Key(t)
	stale := mustAcquire(t, d1, testkit.Request(key, 30*time.Millisecond))
	deadline := time.Now().Add(5 * time.Second)
	for id, _ := holderOf(t, rdb, DefaultKeyPrefix, key); id != ""; id, _ = holderOf(t, rdb, DefaultKeyPrefix, key) {
		if time.Now().After(deadline) {
			t.Fatal("the lock did not expire")
		}
		time.Sleep(5 * time.Millisecond) // polling the server for the expiry
	}
	req := testkit.Request(key, 10*time.Second)
	fresh := mustAcquire(t, d2, req)
	if err := stale.Extend(ctxFor(t), time.Minute); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("stale Extend: got %v, want ErrNotHeld", err)
	}
	if err := stale.Release(ctxFor(t)); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("stale Release: got %v, want ErrNotHeld", err)
	}
	id, ttl := holderOf(t, rdb, DefaultKeyPrefix, key)
	if id != req.ID || ttl <= 0 || ttl > req.TTL {
		t.Fatalf("after the stale calls the lock holds %q with TTL %v, want %q untouched (TTL up to %v)", id, ttl, req.ID, req.TTL)
	}
	if err := fresh.Extend(ctxFor(t), 20*time.Second); err != nil {
		t.Fatalf("holder's Extend: %v", err)
	}
	if _, ttl := holderOf(t, rdb, DefaultKeyPrefix, key); ttl <= req.TTL {
		t.Fatalf("after Extend to 20s the TTL is %v", ttl)
	}
	if fresh.Validity() != 20*time.Second {
		t.Fatalf("Validity after Extend = %v, want 20s", fresh.Validity())
	}
	if err := fresh.Release(ctxFor(t)); err != nil {
		t.Fatalf("holder's Release: %v", err)
	}
}

func TestReleasePublishes(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	rdb := newRDB(t)
	holder, waiter := newTestDriver(t, rdb), newTestDriver(t, newRDB(t))
	key, other := testkit.Key(t), testkit.Key(t)

	s, err := waiter.Subscribe(ctxFor(t), key)
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	// The server's confirmation wakes the subscriber once (see notifier).
	if !waken(s, 5*time.Second) {
		t.Fatal("no wake-up when the subscription took effect")
	}
	s2, err := waiter.Subscribe(ctxFor(t), key) // shares the channel
	if err != nil {
		t.Fatalf("second Subscribe: %v", err)
	}
	sOther, err := waiter.Subscribe(ctxFor(t), other)
	if err != nil {
		t.Fatal(err)
	}
	waken(sOther, 5*time.Second)

	l := mustAcquire(t, holder, testkit.Request(key, 5*time.Second))
	if err := l.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	if !waken(s, 5*time.Second) || !waken(s2, 5*time.Second) {
		t.Fatal("a release did not wake both subscribers of its key")
	}
	if waken(sOther, 100*time.Millisecond) {
		t.Fatal("a release woke the subscriber of another key")
	}

	// A release that finds the lock not ours publishes nothing.
	if err := l.Release(ctxFor(t)); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatal(err)
	}
	if waken(s, 100*time.Millisecond) {
		t.Fatal("a refused release woke a subscriber")
	}

	// Closing is idempotent, and the channel is unsubscribed on the server
	// once its last subscriber has left, after the linger time.
	channel := namesOf(DefaultKeyPrefix, key).channel()
	numsub := func() int64 {
		n, err := rdb.PubSubNumSub(ctxFor(t), channel).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n[channel]
	}
	if got := numsub(); got != 1 {
		t.Fatalf("PUBSUB NUMSUB with two subscribers of one Driver = %d, want 1 (one shared connection)", got)
	}
	for _, c := range []driver.Subscription{s, s, s2, s2, sOther} {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	left := time.Now()
	deadline := left.Add(linger + 5*time.Second)
	for numsub() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the channel is still subscribed after its last subscriber left")
		}
		time.Sleep(5 * time.Millisecond) // polling the server
	}
	if gone := time.Since(left); gone < linger/2 {
		t.Errorf("the channel was unsubscribed %v after its last subscriber left, want it to linger for %v", gone, linger)
	}
	if err := waiter.Close(); err != nil {
		t.Fatal(err)
	}
	if err := holder.Close(); err != nil {
		t.Fatal(err)
	}
	_ = s.Close() // after the Driver's Close: harmless
}

// cancelAfterScript lets the next script run on the server, then reports
// that its context ended: what a caller sees when ctx ends while the reply
// is on its way.
type cancelAfterScript struct {
	armed  atomic.Bool
	cancel context.CancelFunc
}

func (h *cancelAfterScript) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (h *cancelAfterScript) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}
func (h *cancelAfterScript) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		err := next(ctx, cmd)
		if (cmd.Name() == "evalsha" || cmd.Name() == "eval") && err == nil && h.armed.CompareAndSwap(true, false) {
			h.cancel()
			cmd.SetErr(context.Canceled)
			return context.Canceled
		}
		return err
	}
}

func TestCancelledContextLeavesNoKey(t *testing.T) {
	rdb := newRDB(t)
	d := newTestDriver(t, rdb)
	key := testkit.Key(t)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := d.Acquire(ctx, testkit.Request(key, time.Second)); err != context.Canceled {
		t.Fatalf("Acquire with a cancelled context: got %v, want exactly context.Canceled", err)
	}
	if id, _ := holderOf(t, rdb, DefaultKeyPrefix, key); id != "" {
		t.Fatalf("the cancelled Acquire left a lock holding %q", id)
	}

	// Cancelled while the script ran: the grant was applied, and must be
	// given back before Acquire returns.
	hooked := newRDB(t)
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	h := &cancelAfterScript{cancel: cancel}
	hooked.AddHook(h)
	hd := newTestDriver(t, hooked)
	h.armed.Store(true)
	_, err := hd.Acquire(ctx, testkit.Request(key, time.Minute))
	if err != context.Canceled {
		t.Fatalf("Acquire cancelled mid-script: got %v, want exactly context.Canceled", err)
	}
	if h.armed.Load() {
		t.Fatal("the hook did not fire")
	}
	if id, _ := holderOf(t, rdb, DefaultKeyPrefix, key); id != "" {
		t.Fatalf("the cancelled Acquire left a lock holding %q", id)
	}

	// Through the core: a Lock cancelled while it waits leaves nothing.
	c := testkit.Client(t, newTestDriver(t, rdb))
	m, _ := c.Mutex(key)
	held := mustAcquire(t, d, testkit.Request(key, 5*time.Second))
	wctx, wcancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer wcancel()
	if _, err := m.Lock(wctx); err != context.DeadlineExceeded {
		t.Fatalf("Lock past its deadline: got %v, want exactly context.DeadlineExceeded", err)
	}
	if err := held.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	if id, _ := holderOf(t, rdb, DefaultKeyPrefix, key); id != "" {
		t.Fatalf("the cancelled Lock left a lock holding %q", id)
	}
}

func TestCloseKeepsCallersClient(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	rdb := newRDB(t)
	d, err := New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	key := testkit.Key(t)
	l := mustAcquire(t, d, testkit.Request(key, 5*time.Second))
	s, err := d.Subscribe(ctxFor(t), key) // starts the shared pub/sub connection
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := rdb.Ping(ctxFor(t)).Err(); err != nil {
		t.Fatalf("the caller's client after the Driver's Close: %v", err)
	}
	// Close releases nothing: the lock ends by its TTL.
	if id, _ := holderOf(t, rdb, DefaultKeyPrefix, key); id == "" {
		t.Fatal("Close released the lock")
	}
	if _, err := d.Acquire(ctxFor(t), testkit.Request(key, time.Second)); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("Acquire after Close: %v", err)
	}
	if _, err := d.Subscribe(ctxFor(t), key); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("Subscribe after Close: %v", err)
	}
	if err := l.Extend(ctxFor(t), time.Second); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("Extend after Close: %v", err)
	}
	if err := l.Release(ctxFor(t)); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("Release after Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Subscription.Close after the Driver's Close: %v", err)
	}
	if err := rdb.Del(ctxFor(t), namesOf(DefaultKeyPrefix, key).lock).Err(); err != nil {
		t.Fatal(err)
	}
}

func TestHostileKeysAreDistinctLocks(t *testing.T) {
	rdb := newRDB(t)
	d1, d2 := newTestDriver(t, rdb), newTestDriver(t, newRDB(t))
	keys := hostileKeys()
	var leases []driver.Lease
	for _, key := range testkit.RunKeys(t, keys) {
		leases = append(leases, mustAcquire(t, d1, testkit.Request(key, 10*time.Second)))
		if _, err := d2.Acquire(ctxFor(t), testkit.Request(key, time.Second)); !errors.Is(err, driver.ErrLocked) {
			t.Fatalf("Acquire(%q) while held: got %v, want ErrLocked", key, err)
		}
	}
	for i, l := range leases {
		if err := l.Release(ctxFor(t)); err != nil {
			t.Fatalf("Release of hostile key %d (%q): %v", i, keys[i], err)
		}
	}
}

func TestKeyPrefixSeparatesLocks(t *testing.T) {
	rdb := newRDB(t)
	a := newTestDriver(t, rdb, WithKeyPrefix("app-a:"))
	b := newTestDriver(t, rdb, WithKeyPrefix("app-b:"))
	key := testkit.Key(t)
	la := mustAcquire(t, a, testkit.Request(key, 5*time.Second))
	lb := mustAcquire(t, b, testkit.Request(key, 5*time.Second))
	if n, err := rdb.Exists(ctxFor(t), "app-a:{"+key+"}", "app-b:{"+key+"}").Result(); err != nil || n != 2 {
		t.Fatalf("EXISTS of both prefixed lock keys = %d (%v), want 2", n, err)
	}
	for _, l := range []driver.Lease{la, lb} {
		if err := l.Release(ctxFor(t)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCoreOverDriver(t *testing.T) {
	rdb := newRDB(t)
	c1 := testkit.Client(t, newTestDriver(t, rdb), dlock.WithTTL(2*time.Second))
	c2 := testkit.Client(t, newTestDriver(t, newRDB(t)), dlock.WithTTL(2*time.Second))

	// The core finds read-write and reentrant locks.
	if _, err := c1.RWMutex(testkit.Key(t)); err != nil {
		t.Errorf("RWMutex: %v", err)
	}
	if _, err := c1.Mutex(testkit.Key(t), dlock.WithOwner("me")); err != nil {
		t.Errorf("WithOwner: %v", err)
	}

	key := testkit.Key(t)
	m1, _ := c1.Mutex(key)
	m2, _ := c2.Mutex(key)
	l1 := testkit.Lock(t, ctxFor(t), m1)
	waiter := testkit.Go(func() (dlock.Lease, error) { return m2.Lock(ctxFor(t)) })
	time.Sleep(50 * time.Millisecond) // let the waiter block
	start := time.Now()
	if err := l1.Unlock(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	l2 := waiter.Within(t, 5*time.Second, "the waiter's Lock")
	t.Logf("handoff to a blocked waiter took %v", time.Since(start))
	if l2.Token() <= l1.Token() {
		t.Errorf("token %d after %d", l2.Token(), l1.Token())
	}
	if err := l2.Unlock(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
}

// A Driver's goroutines (the pub/sub reader) end with Close.
func TestNoGoroutineLeak(t *testing.T) {
	rdb := newRDB(t)
	rdb.Ping(ctxFor(t)) // the pool's own connection, outside the check
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for range 3 {
		d, err := New(rdb)
		if err != nil {
			t.Fatal(err)
		}
		var subs []driver.Subscription
		for i := range 5 {
			s, err := d.Subscribe(ctxFor(t), "leak/"+strconv.Itoa(i))
			if err != nil {
				t.Fatal(err)
			}
			subs = append(subs, s)
		}
		subs[0].Close()
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
