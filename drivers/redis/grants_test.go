package redis

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

// grantTTL is the TTL of the grant tests' requests: their holds granted by
// release last at most a queue entry's lifetime, min(TTL, 2 s).
const grantTTL = 5 * time.Second

// countedDriver returns a Driver over a client of its own whose requests
// are counted, by script and reply (requestCounter).
func countedDriver(t *testing.T) (*Driver, *requestCounter, *goredis.Client) {
	t.Helper()
	var counted requestCounter
	rdb := newRDB(t)
	rdb.AddHook(&counted)
	return newTestDriver(t, rdb), &counted, rdb
}

// kinds returns a copy of what c counted, by kind.
func (c *requestCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[string]int{}
	for k, v := range c.kinds {
		m[k] = v
	}
	return m
}

// waitingFor subscribes d to key (and waits for the confirmation's
// wake-up), then sends one waiting request, which the lock's holder makes
// the server refuse and queue.
func waitingFor(t *testing.T, d *Driver, key string) (driver.Subscription, driver.Request) {
	t.Helper()
	ctx := ctxFor(t)
	sub, err := d.Subscribe(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	if !waken(sub, 10*time.Second) {
		t.Fatal("no wake-up for the subscription's confirmation")
	}
	req := testkit.Request(key, grantTTL)
	req.Wait = true
	if _, err := d.Acquire(ctx, req); !isQueued(err, true) {
		t.Fatalf("waiting request while held: got %v, want a queued LockedError", err)
	}
	return sub, req
}

// nextWaiting is a waiting request for key with a new ID: the core's next
// attempt of the same Lock.
func nextWaiting(key string) driver.Request {
	req := testkit.Request(key, grantTTL)
	req.Wait = true
	return req
}

// A release grants the lock to the queue's head by itself, and the head's
// next Acquire takes it from the message with no request: a lease of the
// hold granted to the head's queued request ID, with a token above the
// releaser's, which renews (alone and batched), transfers and releases as
// any other.
func TestReleaseGrantsQueueHead(t *testing.T) {
	rdb := newRDB(t)
	holder := newTestDriver(t, rdb)
	head, counted, _ := countedDriver(t)
	key := testkit.Key(t)
	ctx := ctxFor(t)
	held := mustAcquire(t, holder, testkit.Request(key, grantTTL))
	sub, queued := waitingFor(t, head, key)

	before := counted.n.Load()
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if !waken(sub, 10*time.Second) {
		t.Fatal("the queue's head was not woken by the release")
	}
	holds := holdsOf(t, rdb, DefaultKeyPrefix, key)
	h, ok := holds[queued.ID]
	if len(holds) != 1 || !ok {
		t.Fatalf("holds after the release: %v, want one, the head's queued request %s", holds, queued.ID)
	}
	l, err := head.Acquire(ctx, nextWaiting(key))
	if err != nil {
		t.Fatalf("the head's Acquire after the grant: %v", err)
	}
	if got := counted.n.Load() - before; got != 0 {
		t.Errorf("the head sent %d requests between the release and its grant, want 0", got)
	}
	if id := l.(*lease).id; id != queued.ID {
		t.Errorf("the lease holds request %s, want the queued request %s", id, queued.ID)
	}
	if l.Token() != h.token || l.Token() <= held.Token() {
		t.Errorf("token %d (hold's %d) after the releaser's %d, want the hold's, greater", l.Token(), h.token, held.Token())
	}
	if v := l.Validity(); v <= 0 || v > queueLife(grantTTL) {
		t.Errorf("validity %v, want in (0, %v]", v, queueLife(grantTTL))
	}
	if n := queueLen(t, rdb, key); n != 0 {
		t.Errorf("queue holds %d Drivers after the grant, want 0", n)
	}
	if err := l.Extend(ctx, grantTTL); err != nil {
		t.Fatalf("Extend of the claimed grant: %v", err)
	}
	if errs := head.ExtendBatch(ctx, []driver.Lease{l}, []time.Duration{grantTTL}); errs[0] != nil {
		t.Fatalf("ExtendBatch of the claimed grant: %v", errs[0])
	}
	next := testkit.Request(key, grantTTL)
	moved, err := head.Transfer(ctx, l, next)
	if err != nil {
		t.Fatalf("Transfer from the claimed grant: %v", err)
	}
	if moved.Token() <= l.Token()+tokenBlock-1 {
		t.Errorf("transferred token %d, want past the claimed grant's block (%d + %d)", moved.Token(), l.Token(), tokenBlock)
	}
	if err := l.Release(ctx); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Release of the claimed grant after its transfer: %v, want ErrNotHeld", err)
	}
	l = moved
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release of the transferred grant: %v", err)
	}
	if n, _ := rdb.Exists(ctx, namesOf(DefaultKeyPrefix, key).lock).Result(); n != 0 {
		t.Error("the lock's key is still there after the claimed grant's release")
	}
}

// Across two Clients, a waiting Lock gets the lock the holder's Unlock
// frees without an acquire request granted to it: the grant came from the
// release, by its message.
func TestLockHandedByRelease(t *testing.T) {
	key := testkit.Key(t)
	a := testkit.Client(t, newTestDriver(t, newRDB(t)), dlock.WithTTL(grantTTL))
	bd, counted, _ := countedDriver(t)
	b := testkit.Client(t, bd, dlock.WithTTL(grantTTL))
	ma, mb := testkit.Mutex(t, a, key), testkit.Mutex(t, b, key)
	// A message that reaches the waiter too late to leave a quarter of the
	// hold's TTL (a machine stalled for about a second) is rightly not
	// taken: the waiter takes the lock over by a request instead. So the
	// test hands the lock over several times and asks that at least one
	// handoff came from the message alone, and that every one is fenced.
	const rounds = 5
	fromMessage := 0
	for range rounds {
		held := testkit.Lock(t, ctxFor(t), ma)
		got := make(chan error, 1)
		var lb dlock.Lease
		go func() {
			var err error
			lb, err = mb.Lock(ctxFor(t))
			got <- err
		}()
		waitQueued(t, key, 1)
		before := counted.snapshot()
		token := held.Token()
		if err := held.Unlock(ctxFor(t)); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatalf("the waiting Lock: %v", err)
		}
		after := counted.snapshot()
		if after["acquire1"] == before["acquire1"] {
			fromMessage++
		}
		t.Logf("the waiter's requests from its queueing to its grant: %v, then %v", before, after)
		if lb.Token() <= token {
			t.Errorf("token %d after %d, want greater", lb.Token(), token)
		}
		if err := lb.Unlock(ctxFor(t)); err != nil {
			t.Fatal(err)
		}
	}
	if fromMessage == 0 {
		t.Errorf("none of %d handoffs came from the release's grant alone: each cost a granted acquire request", rounds)
	}
}

// lateGrant runs the late message case, with the claim counting validity
// from the message's arrival when broken: the head's grant message is held
// back until the hold it names has lapsed and another Driver holds the
// lock; it reports whether the head then got a lease from the message as
// well (two holders).
func lateGrant(t *testing.T, broken bool) bool {
	rdb := newRDB(t)
	holder, other := newTestDriver(t, rdb), newTestDriver(t, rdb)
	head, _, _ := countedDriver(t)
	held := make(chan func(), 1)
	head.grants.intercept = func(_ grantMsg, deliver func()) { held <- deliver }
	head.grants.fromArrival = broken
	key := testkit.Key(t)
	ctx := ctxFor(t)
	n := namesOf(DefaultKeyPrefix, key)
	l := mustAcquire(t, holder, testkit.Request(key, grantTTL))
	_, _ = waitingFor(t, head, key)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var deliver func()
	select {
	case deliver = <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("no grant message for the queue's head")
	}
	// The hold lapses (at most a queue entry's lifetime after the grant).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if k, err := rdb.Exists(ctx, n.lock).Result(); err != nil {
			t.Fatal(err)
		} else if k == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the grant's hold did not lapse")
		}
	}
	theirs := mustAcquire(t, other, testkit.Request(key, grantTTL))
	defer func() { _ = theirs.Release(ctx) }()
	deliver() // late
	mine, err := head.Acquire(ctx, nextWaiting(key))
	if err == nil {
		_ = mine.Release(ctx)
		return true
	}
	if !errors.Is(err, driver.ErrLocked) {
		t.Fatalf("the head's Acquire after a late grant message: %v", err)
	}
	return false
}

// A grant message that comes after its hold lapsed, when another Driver
// holds the lock, is not claimed: its validity, counted from when the
// head sent the attempt it grants, is gone. Counted from the message's
// arrival instead (the broken variant), it would make a second holder,
// which this test catches.
func TestLateGrantNotClaimed(t *testing.T) {
	if lateGrant(t, false) {
		t.Fatal("a late grant message made a second holder")
	}
	if !lateGrant(t, true) {
		t.Fatal("the broken variant (validity from the message's arrival) made no second holder: the test does not catch it")
	}
}

// A grant message that comes twice is claimed once.
func TestDuplicateGrantClaimedOnce(t *testing.T) {
	rdb := newRDB(t)
	holder := newTestDriver(t, rdb)
	head, counted, _ := countedDriver(t)
	head.grants.intercept = func(_ grantMsg, deliver func()) { deliver(); deliver() }
	key := testkit.Key(t)
	ctx := ctxFor(t)
	l := mustAcquire(t, holder, testkit.Request(key, grantTTL))
	sub, _ := waitingFor(t, head, key)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if !waken(sub, 10*time.Second) {
		t.Fatal("the queue's head was not woken by the release")
	}
	first, err := head.Acquire(ctx, nextWaiting(key))
	if err != nil {
		t.Fatalf("the first Acquire after the grant: %v", err)
	}
	granted := counted.snapshot()["acquire1"]
	if second, err := head.Acquire(ctx, nextWaiting(key)); !errors.Is(err, driver.ErrLocked) {
		if err == nil {
			_ = second.Release(ctx)
		}
		t.Fatalf("a second Acquire after a duplicated grant message: got %v, want ErrLocked", err)
	}
	if got := counted.snapshot()["acquire1"]; got != granted {
		t.Errorf("%d acquire requests granted during the second Acquire, want none", got-granted)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatalf("Release of the grant claimed once: %v", err)
	}
}

// A waiter that gives up after a release granted it the lock leaves it
// free for others at once: its Driver releases the unclaimed grant, when
// the message came before it gave up (with the subscription's Close), and
// when it came after (at once, on its arrival).
func TestGivenUpGrantReleased(t *testing.T) {
	for _, early := range []bool{true, false} {
		rdb := newRDB(t)
		holder, other := newTestDriver(t, rdb), newTestDriver(t, rdb)
		head, counted, _ := countedDriver(t)
		var mu sync.Mutex
		var deliver func()
		delivered := make(chan struct{}, 1)
		head.grants.intercept = func(_ grantMsg, d func()) {
			if early {
				d()
			} else {
				mu.Lock()
				deliver = d
				mu.Unlock()
			}
			delivered <- struct{}{}
		}
		key := testkit.Key(t)
		ctx := ctxFor(t)
		n := namesOf(DefaultKeyPrefix, key)
		l := mustAcquire(t, holder, testkit.Request(key, grantTTL))
		sub, queued := waitingFor(t, head, key)
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-delivered:
		case <-time.After(10 * time.Second):
			t.Fatal("no grant message for the queue's head")
		}
		if _, ok := holdsOf(t, rdb, DefaultKeyPrefix, key)[queued.ID]; !ok {
			t.Fatalf("early %v: the release did not grant the head's queued request", early)
		}
		released := counted.snapshot()["release"]
		_ = sub.Close() // the waiter gives up
		if !early {
			mu.Lock()
			deliver()
			mu.Unlock()
			head.grants.gives.Wait()
		}
		if got := counted.snapshot()["release"]; got != released+1 {
			t.Errorf("early %v: the head's Driver sent %d releases after giving up, want 1", early, got-released)
		}
		if k, err := rdb.Exists(ctx, n.lock).Result(); err != nil || k != 0 {
			t.Fatalf("early %v: the lock is still held after its waiter gave up (%v)", early, err)
		}
		theirs := mustAcquire(t, other, testkit.Request(key, grantTTL))
		if _, err := head.Acquire(ctx, nextWaiting(key)); !errors.Is(err, driver.ErrLocked) {
			t.Fatalf("early %v: the head after giving up: got %v, want ErrLocked", early, err)
		}
		_ = theirs.Release(ctx)
	}
}

// A grant message that is lost costs the head no more than its next
// attempt: that attempt names the request the grant went to, and takes
// its hold over (a new request ID, a new token) instead of queueing behind
// the head's own grant.
func TestLostGrantTakenOver(t *testing.T) {
	rdb := newRDB(t)
	holder := newTestDriver(t, rdb)
	head, _, _ := countedDriver(t)
	lost := make(chan struct{}, 1)
	head.grants.intercept = func(grantMsg, func()) { lost <- struct{}{} }
	key := testkit.Key(t)
	ctx := ctxFor(t)
	l := mustAcquire(t, holder, testkit.Request(key, grantTTL))
	_, queued := waitingFor(t, head, key)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lost:
	case <-time.After(10 * time.Second):
		t.Fatal("no grant message for the queue's head")
	}
	granted := holdsOf(t, rdb, DefaultKeyPrefix, key)[queued.ID]
	req := nextWaiting(key)
	mine, err := head.Acquire(ctx, req)
	if err != nil {
		t.Fatalf("the head's next attempt after a lost grant message: %v", err)
	}
	holds := holdsOf(t, rdb, DefaultKeyPrefix, key)
	if _, ok := holds[req.ID]; len(holds) != 1 || !ok {
		t.Errorf("holds after the take-over: %v, want the new request's alone", holds)
	}
	if mine.Token() <= granted.token {
		t.Errorf("token %d after the lost grant's %d, want greater", mine.Token(), granted.token)
	}
	_ = mine.Release(ctx)
}

// TestRequestsPerSection is a measurement: set DLOCK_REDIS_COUNT=1 to run
// it. N Drivers (each its own Client and connection, as N processes) lock
// and unlock one key in turn, and the server's commandstats count the
// scripts they ran per critical section.
func TestRequestsPerSection(t *testing.T) {
	if os.Getenv("DLOCK_REDIS_COUNT") == "" {
		t.Skip("a measurement: set DLOCK_REDIS_COUNT=1 to run it")
	}
	rdb := newRDB(t)
	scripts := func() int64 {
		info, err := rdb.Info(ctxFor(t), "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, line := range strings.Split(info, "\n") {
			for _, name := range []string{"cmdstat_evalsha:calls=", "cmdstat_eval:calls="} {
				if rest, ok := strings.CutPrefix(line, name); ok {
					v, _, _ := strings.Cut(rest, ",")
					k, _ := strconv.ParseInt(v, 10, 64)
					n += k
				}
			}
		}
		return n
	}
	for _, drivers := range []int{2, 8} {
		key := testkit.Key(t)
		const sections = 400
		var ms []dlock.Mutex
		for range drivers {
			c := testkit.Client(t, newTestDriver(t, newRDB(t)), dlock.WithTTL(grantTTL))
			m := testkit.Mutex(t, c, key)
			l := testkit.Lock(t, ctxFor(t), m) // loads the scripts
			_ = l.Unlock(ctxFor(t))
			ms = append(ms, m)
		}
		before := scripts()
		lockInTurns(t, ms, sections/drivers)
		t.Logf("%d Drivers in turn: %.2f scripts per critical section (%d sections)", drivers, float64(scripts()-before)/sections, sections)
	}
}

// The mailbox's rules, without a server: a grant is claimable only for an
// attempt whose reply came back as a queued refusal, by a request with the
// attempt's TTL, with enough validity left counted from the attempt's send,
// and once; an attempt named for take-over is never claimed.
func TestGrantClaimRules(t *testing.T) {
	d := newDriver(offlineRDB(), false, defaultOptions())
	defer d.Close()
	n := namesOf(DefaultKeyPrefix, "k")
	// A waiter of the Driver watches the key (no server: by hand).
	d.notify.chans[n.channel()] = &channel{subs: map[*subscription]struct{}{{}: {}}}
	msg := func(seq uint64, id string) grantMsg {
		return grantMsg{id: id, token: 7, hold: 2 * time.Second, seq: seq}
	}
	const ttl = 5 * time.Second

	seq, takeover := d.grants.begin(n, "a", ttl)
	if takeover != "" {
		t.Fatalf("first attempt names %q for take-over", takeover)
	}
	d.grants.deliver(n.lock, msg(seq, "a")) // before the attempt's reply
	if _, _, ok := d.grants.claim(n, ttl, time.Now()); ok {
		t.Fatal("claimed a grant for an attempt still in flight")
	}
	d.grants.finish(n, seq, true, false)
	if _, _, ok := d.grants.claim(n, 2*ttl, time.Now()); ok {
		t.Fatal("claimed by a request with another TTL")
	}
	m, v, ok := d.grants.claim(n, ttl, time.Now())
	if !ok || m.id != "a" || v <= 0 || v > m.hold {
		t.Fatalf("claim: %+v, %v, %v; want a's grant with validity in (0, %v]", m, v, ok, m.hold)
	}
	d.grants.deliver(n.lock, msg(seq, "a")) // a duplicate
	if _, _, ok := d.grants.claim(n, ttl, time.Now()); ok {
		t.Fatal("claimed a duplicate")
	}

	// Named for take-over: never claimed after.
	seq, _ = d.grants.begin(n, "b", ttl)
	d.grants.finish(n, seq, true, false)
	d.grants.deliver(n.lock, msg(seq, "b"))
	if _, takeover = d.grants.begin(n, "c", ttl); takeover != "b" {
		t.Fatalf("take-over names %q, want b", takeover)
	}
	if _, _, ok := d.grants.claim(n, ttl, time.Now()); ok {
		t.Fatal("claimed a grant named for take-over")
	}

	// Too little validity left, counted from the send: not claimed.
	seq, _ = d.grants.begin(n, "e", ttl)
	d.grants.finish(n, seq, true, false)
	d.grants.deliver(n.lock, msg(seq, "e"))
	if _, _, ok := d.grants.claim(n, ttl, time.Now().Add(2*time.Second)); ok {
		t.Fatal("claimed a grant whose hold has run out since its attempt was sent")
	}
	// A message naming another ID than the attempt's is no grant of it.
	seq, _ = d.grants.begin(n, "f", ttl)
	d.grants.finish(n, seq, true, false)
	d.grants.deliver(n.lock, msg(seq, "g"))
	if _, _, ok := d.grants.claim(n, ttl, time.Now()); ok {
		t.Fatal("claimed a grant for an ID the attempt did not have")
	}
}

// Grant messages parse only in their own shape; the name alone is a
// wake-up.
func TestParseGrant(t *testing.T) {
	if m, ok := parseGrant("SELF abc 42 1500 3"); !ok || m.id != "abc" || m.token != 42 || m.hold != 1500*time.Millisecond || m.seq != 3 {
		t.Errorf("parseGrant: %+v, %v", m, ok)
	}
	for _, p := range []string{"SELF", "SELF abc 42 1500", "SELF abc x 1500 3", "SELF abc 42 0 3", "SELF abc 42 1500 3 9"} {
		if _, ok := parseGrant(p); ok {
			t.Errorf("parseGrant(%q) accepted", p)
		}
	}
}

// Under contention every critical section adds an attempt: the claimed and
// superseded ones are forgotten at once, so the mailbox's state stays
// small (begin scans it), and a duplicate or late message for a forgotten
// attempt is still never claimed.
func TestGrantAttemptsRetired(t *testing.T) {
	d := newDriver(offlineRDB(), false, defaultOptions())
	defer d.Close()
	n := namesOf(DefaultKeyPrefix, "k")
	d.notify.chans[n.channel()] = &channel{subs: map[*subscription]struct{}{{}: {}}}
	const ttl = 5 * time.Second
	for i := range 1000 {
		id := "a" + strconv.Itoa(i)
		seq, _ := d.grants.begin(n, id, ttl)
		switch i % 3 {
		case 0: // refused, then granted by release and claimed
			d.grants.finish(n, seq, true, false)
			m := grantMsg{id: id, token: 7, hold: 2 * time.Second, seq: seq}
			d.grants.deliver(n.lock, m)
			if _, _, ok := d.grants.claim(n, ttl, time.Now()); !ok {
				t.Fatalf("attempt %d: grant not claimed", i)
			}
			d.grants.deliver(n.lock, m) // a duplicate, for a forgotten attempt
			if _, _, ok := d.grants.claim(n, ttl, time.Now()); ok {
				t.Fatalf("attempt %d: duplicate claimed", i)
			}
		case 1: // granted by its own reply
			d.grants.finish(n, seq, false, true)
		case 2: // refused and queued: the next attempt supersedes it
			d.grants.finish(n, seq, true, false)
		}
	}
	d.grants.mu.Lock()
	left := len(d.grants.locks[n.lock].attempts)
	d.grants.mu.Unlock()
	if left > 1 {
		t.Errorf("%d attempts remembered after 1000, want at most the one pending", left)
	}
}
