package hazelcast

// Tests of Inspect (inspect.go), and of what an election over the driver
// can and cannot do without Values.

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

// inspect returns d's Info of key, or fails tb.
func inspect(tb testing.TB, d *Driver, key string) driver.Info {
	tb.Helper()
	info, err := d.Inspect(ctxFor(tb), key)
	if err != nil {
		tb.Fatalf("Inspect(%q): %v", key, err)
	}
	return info
}

// expectInfo fails tb unless d's Info of key is want.
func expectInfo(tb testing.TB, d *Driver, key, when string, want driver.Info) {
	tb.Helper()
	if got := inspect(tb, d, key); got != want {
		tb.Errorf("Inspect %s: %+v, want %+v", when, got, want)
	}
}

// heldInfo is the Info of a lock held with token.
func heldInfo(token uint64) driver.Info {
	return driver.Info{Held: true, Holders: 1, Token: token, Waiters: -1}
}

// freeInfo is the Info of a free lock whose latest token is token.
func freeInfo(token uint64) driver.Info {
	return driver.Info{Token: token, Waiters: -1}
}

// A hold's value is taken and never reported (the driver declares no
// Values); the hold's token is, from its grant to its release, its lapse on
// the member, and the lease's expiry there.
func TestInspectThroughAHold(t *testing.T) {
	testkit.NoLeaks(t)
	d := newMemberDriver(t, "")
	key := testkit.Key(t)
	expectInfo(t, d.Driver, key, "of a key never locked", freeInfo(0))

	req := testkit.Request(key, testTTL)
	req.Value = "node-a"
	dl, err := d.Acquire(ctxFor(t), req)
	if err != nil {
		t.Fatalf("Acquire with a value: %v", err)
	}
	first := dl.(*lease)
	expectInfo(t, d.Driver, key, "while held", heldInfo(first.Token()))
	if err := first.Release(ctxFor(t)); err != nil {
		t.Fatalf("Release: %v", err)
	}
	expectInfo(t, d.Driver, key, "after the release", freeInfo(first.Token()))

	// A lapse: the member frees the lock (a force-unlock, as at the end of
	// its lease), and the latest token stays the lapsed holder's.
	second := d.acquire(t, key)
	if second.Token() <= first.Token() {
		t.Fatalf("tokens %d then %d, want increasing", first.Token(), second.Token())
	}
	expectInfo(t, d.Driver, key, "held again", heldInfo(second.Token()))
	d.lapse(t, key)
	expectInfo(t, d.Driver, key, "after a lapse", freeInfo(second.Token()))

	// An owner outside dlock issues no token: the lock is held, with the
	// latest token dlock issued.
	lc := d.stranger(t, key, testTTL)
	expectInfo(t, d.Driver, key, "held by a stranger", heldInfo(second.Token()))
	if !d.heldOnceBy(t, lc, key) {
		t.Fatal("the stranger's lock was not as it took it")
	}

	// A lease that runs out on the member: the member frees the lock
	// within its lease plus two seconds (see Leases in the package doc);
	// the test looks until then, with room to spare on a loaded machine.
	const short = 3 * time.Second // a second of validity more than MinTTL, for a loaded machine
	started := time.Now()
	third, err := d.Acquire(ctxFor(t), testkit.Request(key, short))
	if err != nil {
		t.Fatalf("Acquire for %v: %v", short, err)
	}
	expectInfo(t, d.Driver, key, "held for a short lease", heldInfo(third.Token()))
	look := time.NewTicker(50 * time.Millisecond) // the pace of the looks
	defer look.Stop()
	for inspect(t, d.Driver, key).Held {
		if time.Since(started) > short+20*time.Second {
			t.Fatalf("the lock is still held %v after a lease of %v began", time.Since(started), short)
		}
		<-look.C
	}
	expectInfo(t, d.Driver, key, "after the lease ran out", freeInfo(third.Token()))
}

// Inspect reports a token only when the counter held it across the read of
// the lock, and reads again while grants advance it.
func TestInspectRereadsAMovingCounter(t *testing.T) {
	testkit.NoLeaks(t)
	d := newMemberDriver(t, "")
	key := testkit.Key(t)
	d.setFence(t, key, 100)
	var reads, moves atomic.Int64
	var limit atomic.Int64
	// A grant of another client advances the counter after each of the
	// first limit reads.
	d.rec.setAfter(func(c call) error {
		if c.op != "fence" || c.key != mapKey(key) {
			return nil
		}
		reads.Add(1)
		if moves.Load() >= limit.Load() {
			return nil
		}
		moves.Add(1)
		v, err := d.fences.Get(ctxFor(t), c.key)
		if err != nil {
			return err
		}
		return d.fences.Set(ctxFor(t), c.key, v.(int64)+1)
	})

	limit.Store(1) // moves once, under the first try
	expectInfo(t, d.Driver, key, "after the counter moved once", freeInfo(101))
	if n := reads.Load(); n != 3 {
		t.Errorf("%d reads of the counter, want 3 (two tries sharing one)", n)
	}

	reads.Store(0)
	moves.Store(0)
	limit.Store(1 << 30) // moves under every try
	expectInfo(t, d.Driver, key, "while the counter never stops", freeInfo(0))
	if n := reads.Load(); n != maxInspectTries+1 {
		t.Errorf("%d reads of the counter, want %d", n, maxInspectTries+1)
	}
}

func TestInspectClosedOrDisconnected(t *testing.T) {
	// No api: a call to the member would panic.
	d := newDriver(nil, defaultOptions(), newSession())
	d.session.lose(errDisconnected)
	if _, err := d.Inspect(context.Background(), "k"); !errors.Is(err, errNotConnected) {
		t.Errorf("Inspect while disconnected: %v, want errNotConnected", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Inspect(context.Background(), "k"); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("Inspect after Close: %v, want driver.ErrClosed", err)
	}
}

// An election over the driver: candidates campaign and resign, terms are
// the leases' tokens and rise, and Inspect shows the leader's term; Leader
// and Observe are unsupported, since the driver stores no values.
func TestElectionOverHazelcast(t *testing.T) {
	testkit.NoLeaks(t)
	mapName := testMapName()
	client := func() *dlock.Client {
		c, err := dlock.New(openMember(t, mapName))
		if err != nil {
			t.Fatalf("dlock.New: %v", err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	ca, cb := client(), client()
	key := testkit.Key(t)
	election := func(c *dlock.Client) dlock.Election {
		e, err := c.Election(key, dlock.WithTTL(testTTL))
		if err != nil {
			t.Fatalf("Election: %v", err)
		}
		return e
	}
	ea, eb := election(ca), election(cb)

	la, err := ea.Campaign(ctxFor(t), "node-a")
	if err != nil {
		t.Fatalf("Campaign of node-a: %v", err)
	}
	if info, err := cb.Inspect(ctxFor(t), key); err != nil || info != heldInfo(la.Token()) {
		t.Errorf("Inspect from the other client: %+v, %v; want held at node-a's term %d", info, err, la.Token())
	}
	if _, err := eb.Leader(ctxFor(t)); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Leader: %v, want errors.ErrUnsupported", err)
	}
	if _, err := eb.Observe(ctxFor(t)); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Observe: %v, want errors.ErrUnsupported", err)
	}

	type result struct {
		l   dlock.Lease
		err error
	}
	won := make(chan result, 1)
	ctx := ctxFor(t)
	go func() {
		l, err := eb.Campaign(ctx, "node-b")
		won <- result{l, err}
	}()
	// node-b waits while node-a leads, or campaigns after the resignation:
	// either way it leads next, with a greater term.
	if err := ea.Resign(ctxFor(t)); err != nil {
		t.Fatalf("Resign of node-a: %v", err)
	}
	r := <-won
	if r.err != nil {
		t.Fatalf("Campaign of node-b: %v", r.err)
	}
	if r.l.Token() <= la.Token() {
		t.Errorf("terms %d then %d, want rising", la.Token(), r.l.Token())
	}
	if info, err := ca.Inspect(ctxFor(t), key); err != nil || info != heldInfo(r.l.Token()) {
		t.Errorf("Inspect after the change: %+v, %v; want held at node-b's term %d", info, err, r.l.Token())
	}
	if err := eb.Resign(ctxFor(t)); err != nil {
		t.Fatalf("Resign of node-b: %v", err)
	}
	if info, err := ca.Inspect(ctxFor(t), key); err != nil || info != freeInfo(r.l.Token()) {
		t.Errorf("Inspect after both resigned: %+v, %v; want free with node-b's term %d", info, err, r.l.Token())
	}
}
