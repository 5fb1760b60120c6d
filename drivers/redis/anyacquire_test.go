package redis

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

// anyRequests returns a plain exclusive request with ttl for each of keys,
// each with its own ID, as the core's semaphore makes them.
func anyRequests(keys []string, ttl time.Duration) []driver.Request {
	reqs := make([]driver.Request, len(keys))
	for i, k := range keys {
		reqs[i] = testkit.Request(k, ttl)
	}
	return reqs
}

// anyKeys returns n keys of the test's own.
func anyKeys(t *testing.T, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = testkit.Key(t) + "/permit/" + strconv.Itoa(i)
	}
	return keys
}

// AcquireAny grants the first free lock, as Acquire would (the next token
// of that key, a hold a plain Acquire is refused by), and touches no other.
func TestAcquireAnyGrantsFirstFree(t *testing.T) {
	rdb := newRDB(t)
	d, other := newTestDriver(t, rdb), newTestDriver(t, newRDB(t))
	keys := anyKeys(t, 4)
	held0 := mustAcquire(t, other, testkit.Request(keys[0], time.Minute))
	held2 := mustAcquire(t, other, testkit.Request(keys[2], time.Minute))
	// The key's earlier token, which the grant must pass.
	before := mustAcquire(t, other, testkit.Request(keys[1], time.Minute))
	if err := before.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}

	reqs := anyRequests(keys, time.Minute)
	l, i, err := d.AcquireAny(ctxFor(t), reqs)
	if err != nil {
		t.Fatalf("AcquireAny: %v", err)
	}
	if i != 1 {
		t.Fatalf("AcquireAny granted request %d, want 1 (the first free)", i)
	}
	if l.Token() <= before.Token() || l.Validity() != reqs[1].TTL {
		t.Fatalf("lease: token %d validity %v, want a token above %d and %v", l.Token(), l.Validity(), before.Token(), reqs[1].TTL)
	}
	if id, _ := holderOf(t, rdb, DefaultKeyPrefix, keys[1]); id != reqs[1].ID {
		t.Fatalf("lock 1 holds %q, want %q", id, reqs[1].ID)
	}
	if id, _ := holderOf(t, rdb, DefaultKeyPrefix, keys[3]); id != "" {
		t.Fatalf("lock 3, after the grant, holds %q: want it untried", id)
	}
	if _, err := other.Acquire(ctxFor(t), testkit.Request(keys[1], time.Second)); !errors.Is(err, driver.ErrLocked) {
		t.Fatalf("plain Acquire of the granted lock: got %v, want ErrLocked", err)
	}
	// The lease is the key's ordinary hold.
	if err := l.Extend(ctxFor(t), 2*time.Minute); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if err := l.Release(ctxFor(t)); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if id, _ := holderOf(t, rdb, DefaultKeyPrefix, keys[1]); id != "" {
		t.Fatalf("after Release lock 1 holds %q", id)
	}
	for _, h := range []driver.Lease{held0, held2} {
		if err := h.Release(ctxFor(t)); err != nil {
			t.Fatalf("the other holds were disturbed: %v", err)
		}
	}
}

// When every lock is held, AcquireAny is refused with the soonest expiry,
// and leaves nothing of its requests behind.
func TestAcquireAnyAllHeld(t *testing.T) {
	rdb := newRDB(t)
	d, other := newTestDriver(t, rdb), newTestDriver(t, newRDB(t))
	keys := anyKeys(t, 3)
	ttls := []time.Duration{time.Minute, 20 * time.Second, 2 * time.Minute}
	for i, k := range keys {
		mustAcquire(t, other, testkit.Request(k, ttls[i]))
	}
	reqs := anyRequests(keys, time.Minute)
	_, _, err := d.AcquireAny(ctxFor(t), reqs)
	le, ok := errors.AsType[*driver.LockedError](err)
	if !errors.Is(err, driver.ErrLocked) || !ok {
		t.Fatalf("AcquireAny of held locks: got %v, want a *LockedError", err)
	}
	if le.RetryAfter <= 0 || le.RetryAfter > ttls[1] {
		t.Fatalf("RetryAfter = %v, want the soonest expiry, in (0, %v]", le.RetryAfter, ttls[1])
	}
	for i, k := range keys {
		if _, ok := holdsOf(t, rdb, DefaultKeyPrefix, k)[reqs[i].ID]; ok {
			t.Fatalf("the refused AcquireAny left a hold of request %d", i)
		}
	}
}

// A resent call (go-redis resends after a connection error) finds the
// grant its first run made, even when a lock ahead of it came free since:
// granting that one would leave the first grant held by nobody.
func TestAcquireAnyResendFindsItsGrant(t *testing.T) {
	rdb := newRDB(t)
	d := newTestDriver(t, rdb)
	keys := anyKeys(t, 3)
	reqs := anyRequests(keys, time.Minute)
	first := mustAcquire(t, d, reqs[2]) // the first run's grant, its reply lost
	l, i, err := d.AcquireAny(ctxFor(t), reqs)
	if err != nil {
		t.Fatalf("AcquireAny: %v", err)
	}
	if i != 2 || l.Token() != first.Token() {
		t.Fatalf("AcquireAny granted request %d with token %d, want request 2 again with token %d", i, l.Token(), first.Token())
	}
	for _, k := range keys[:2] {
		if id, _ := holderOf(t, rdb, DefaultKeyPrefix, k); id != "" {
			t.Fatalf("lock %q holds %q: the resend took a second lock", k, id)
		}
	}
}

// Cancelled while the script ran: whatever it granted is given back
// before AcquireAny returns.
func TestAcquireAnyCancelledLeavesNoHold(t *testing.T) {
	rdb := newRDB(t)
	hooked := newRDB(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := &cancelAfterScript{cancel: cancel}
	hooked.AddHook(h)
	d := newTestDriver(t, hooked)
	keys := anyKeys(t, 3)
	mustAcquire(t, newTestDriver(t, rdb), testkit.Request(keys[0], time.Minute))
	h.armed.Store(true)
	if _, _, err := d.AcquireAny(ctx, anyRequests(keys, time.Minute)); err != context.Canceled {
		t.Fatalf("AcquireAny cancelled mid-script: got %v, want exactly context.Canceled", err)
	}
	if h.armed.Load() {
		t.Fatal("the hook did not fire")
	}
	for _, k := range keys[1:] {
		if id, _ := holderOf(t, rdb, DefaultKeyPrefix, k); id != "" {
			t.Fatalf("the cancelled AcquireAny left lock %q holding %q", k, id)
		}
	}
}

// withoutAnyAcquirer hides the Driver's AcquireAny from the core, which
// then tries a semaphore's permits one request at a time.
type withoutAnyAcquirer struct{ *Driver }

func (w withoutAnyAcquirer) Capabilities() driver.Capabilities {
	c := w.Driver.Capabilities()
	c.AnyAcquirer = nil
	return c
}

// semaphoreRequests returns the requests a TryAcquire costs on average
// over a semaphore of 4 permits with 3 held (the free one released again
// after each), and those of one on the full semaphore, with a Driver made
// by wrap over a counted client.
func semaphoreRequests(t *testing.T, wrap func(*Driver) driver.Driver) (free, full float64) {
	var counted requestCounter
	rdb := newRDB(t)
	rdb.AddHook(&counted)
	c := testkit.Client(t, wrap(newTestDriver(t, rdb)), dlock.WithTTL(time.Minute))
	s, err := c.Semaphore(testkit.Key(t), 4)
	if err != nil {
		t.Fatal(err)
	}
	// Three permits held (this also loads the scripts, whose first run
	// costs a NOSCRIPT round trip).
	var held []dlock.Lease
	for range 3 {
		l, err := s.TryAcquire(ctxFor(t))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	const rounds = 8
	var spent int64
	for range rounds {
		n := counted.n.Load()
		l, err := s.TryAcquire(ctxFor(t))
		if err != nil {
			t.Fatalf("TryAcquire of the last free permit: %v", err)
		}
		spent += counted.n.Load() - n
		if err := l.Unlock(ctxFor(t)); err != nil {
			t.Fatal(err)
		}
	}
	last, err := s.TryAcquire(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	n := counted.n.Load()
	if _, err := s.TryAcquire(ctxFor(t)); !errors.Is(err, dlock.ErrLocked) {
		t.Fatalf("TryAcquire of a full semaphore: got %v, want ErrLocked", err)
	}
	full = float64(counted.n.Load() - n)
	for _, l := range append(held, last) {
		if err := l.Unlock(ctxFor(t)); err != nil {
			t.Fatal(err)
		}
	}
	return float64(spent) / rounds, full
}

// A semaphore's TryAcquire costs one request, whichever permit is free and
// when none is: AcquireAny tries every permit in one script.
func TestSemaphoreTryAcquireIsOneRequest(t *testing.T) {
	free, full := semaphoreRequests(t, func(d *Driver) driver.Driver { return d })
	if free != 1 || full != 1 {
		t.Fatalf("TryAcquire with AcquireAny: %.2f requests with one permit free, %.0f on the full semaphore, want 1 and 1", free, full)
	}
	oneByOne, fullByOne := semaphoreRequests(t, func(d *Driver) driver.Driver { return withoutAnyAcquirer{d} })
	t.Logf("requests per TryAcquire of 4 permits, 3 held: %.2f with AcquireAny, %.2f one permit at a time; full: %.0f and %.0f", free, oneByOne, full, fullByOne)
}

// keySlot agrees with the CRC16 Redis Cluster documents, and with its
// hash-tag rule.
func TestKeySlot(t *testing.T) {
	for name, want := range map[string]int{
		"123456789":       0x31C3, // the CRC16/XMODEM check value
		"foo":             12182,
		"{foo}.bar":       12182,
		"x{foo}y{bar}":    12182, // the first tag only
		"{}foo":           int(crc16("{}foo")) % clusterSlots,
		"dlock:{k%7Bx}":   int(crc16("k%7Bx")) % clusterSlots,
		"a{b":             int(crc16("a{b")) % clusterSlots,
		"dlock:{}{k}":     int(crc16("dlock:{}{k}")) % clusterSlots,
		"dlock:{key}:x{}": int(crc16("key")) % clusterSlots,
	} {
		if got := keySlot(name); got != want {
			t.Errorf("keySlot(%q) = %d, want %d", name, got, want)
		}
	}
}

// On a Cluster, AcquireAny runs one script per run of requests in one slot,
// in order, up to the grant: keySlot agrees with the server on each lock's
// slot, and a grant on the last request costs one script per group.
func (c *clusterEnv) testAcquireAnyAcrossSlots(t *testing.T) {
	cc := c.client(t)
	var counted requestCounter
	cc.AddHook(&counted)
	d := newTestDriver(t, cc)
	other := c.open(t)
	keys := anyKeys(t, 8)
	reqs := anyRequests(keys, time.Minute)
	ns := make([]names, len(keys))
	for i, k := range keys {
		ns[i] = namesOf(DefaultKeyPrefix, k)
		slot, err := cc.ClusterKeySlot(ctxFor(t), ns[i].lock).Result()
		if err != nil {
			t.Fatal(err)
		}
		if int(slot) != keySlot(ns[i].lock) {
			t.Fatalf("keySlot(%q) = %d, the server says %d", ns[i].lock, keySlot(ns[i].lock), slot)
		}
	}
	groups := d.slotGroups(ns)
	if groups[0].lo != 0 || groups[len(groups)-1].hi != len(keys) {
		t.Fatalf("slot groups %v do not cover the %d requests", groups, len(keys))
	}
	for i := 1; i < len(groups); i++ {
		if groups[i].lo != groups[i-1].hi || keySlot(ns[groups[i].lo].lock) == keySlot(ns[groups[i-1].lo].lock) {
			t.Fatalf("slot groups %v: not runs of one slot each", groups)
		}
	}
	for _, k := range keys[:len(keys)-1] {
		mustAcquire(t, other, testkit.Request(k, time.Minute))
	}
	// Every master knows the script, so that each group costs one request.
	if err := cc.ForEachMaster(ctxFor(t), func(ctx context.Context, m *goredis.Client) error {
		return anyAcquireScript.Load(ctx, m).Err()
	}); err != nil {
		t.Fatal(err)
	}
	n := counted.n.Load()
	l, i, err := d.AcquireAny(ctxFor(t), reqs)
	if err != nil {
		t.Fatalf("AcquireAny: %v", err)
	}
	if spent := counted.n.Load() - n; i != len(keys)-1 || spent != int64(len(groups)) {
		t.Fatalf("AcquireAny granted request %d in %d requests, want %d in %d (one per slot group)", i, spent, len(keys)-1, len(groups))
	}
	if _, err := other.Acquire(ctxFor(t), testkit.Request(keys[i], time.Second)); !errors.Is(err, driver.ErrLocked) {
		t.Fatalf("plain Acquire of the granted lock: got %v, want ErrLocked", err)
	}
	if err := l.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d requests over %d slot groups for a grant on the last of %d locks", len(groups), len(groups), len(keys))
}
