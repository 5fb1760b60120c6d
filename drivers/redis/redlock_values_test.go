package redis

import (
	"strconv"
	"testing"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

// Inspect reports a RedLock hold only once a quorum of masters settled it
// with the lease's token, and then with that token and the hold's value: a
// grant between its two phases (each master's own token, pending) is
// reported free, however its masters' tokens compare. The masters' state is
// written here step by step, with the driver's own scripts, as an
// acquisition leaves it between its phases.
func (g *rlGroup) testInspectSettled(t *testing.T) {
	r := g.open(t, "")
	ctx := ctxFor(t)
	key := testkit.Key(t)
	n := namesOf(DefaultKeyPrefix, key)
	// Counters above the servers' clocks (in µs), so that each master's
	// next token is its counter plus one: master 4, which takes no part,
	// issued the highest token so far (a failed attempt's), and masters 1
	// to 3 will issue three different ones.
	base := uint64(1) << 52
	for i, c := range []uint64{base, base, base + 100, base + 200, base + 1000} {
		if err := g.raw[i].Set(ctx, n.fence(), strconv.FormatUint(c, 10), 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, c := range g.raw {
			_ = c.Del(ctxFor(t), n.lock, n.fence()).Err()
		}
	})
	req := driver.Request{Key: key, ID: testkit.NewID(), TTL: time.Minute, Value: "leader-1"}
	var token uint64 // the highest the majority issues: the lease's
	for _, i := range []int{1, 2, 3} {
		gr, err := runAcquire(ctx, acquireScript, g.raw[i], n, req, "", blockFor(req), true)
		if err != nil || !gr.ok {
			t.Fatalf("master %d: first phase: %+v, %v", i, gr, err)
		}
		token = max(token, gr.token)
	}
	if token != base+201 {
		t.Fatalf("the first phase issued %d at most, want %d", token, base+201)
	}
	// Before the second phase a majority holds the lock, each master with
	// its own token; the old Inspect reported it held, with the highest
	// token of any master (base+1000, nobody's).
	info, err := r.Inspect(ctx, key)
	if err != nil || info.Held {
		t.Errorf("between the phases: Inspect = %+v, %v; want free (no settled hold), never a token the lease may not have", info, err)
	}
	// Settled on one master: the token is the lease's, and the other two
	// masters hold the same request, with that token or a lower one (the
	// second phase writes only to as many as a majority needs).
	if err := fence(ctx, g.raw[1], n, req.ID, token, blockFor(req)); err != nil {
		t.Fatal(err)
	}
	info, err = r.Inspect(ctx, key)
	if err != nil || !info.Held || info.Owner != req.ID || info.Token != token || info.Value != "leader-1" || info.Holders != 1 || info.TTL <= 0 {
		t.Errorf("settled on 1 of the 3 holding masters: Inspect = %+v, %v; want held by %s with token %d and value leader-1", info, err, req.ID, token)
	}
	// Gone from the master that issued the token: the two left are not a
	// quorum.
	if ok, err := release(ctx, g.raw[3], n, req.ID, "PUBLISH"); !ok || err != nil {
		t.Fatalf("master 3: release: %v, %v", ok, err)
	}
	if info, err := r.Inspect(ctx, key); err != nil || info.Held {
		t.Errorf("held on 2 of 5: Inspect = %+v, %v; want free", info, err)
	}
	for _, i := range []int{1, 2} {
		if ok, err := release(ctx, g.raw[i], n, req.ID, "PUBLISH"); !ok || err != nil {
			t.Fatalf("master %d: release: %v, %v", i, ok, err)
		}
	}

	// A grant by the driver itself: settled where a majority needs it when
	// Acquire returns, and reported with the lease's token and the value.
	req = driver.Request{Key: key, ID: testkit.NewID(), TTL: time.Minute, Value: "leader-2"}
	l := mustAcquireRL(t, r, req)
	if l.Token() <= token {
		t.Errorf("the next grant's token %d is not above %d", l.Token(), token)
	}
	info, err = r.Inspect(ctx, key)
	if err != nil || !info.Held || info.Owner != req.ID || info.Token != l.Token() || info.Value != "leader-2" {
		t.Errorf("after Acquire: Inspect = %+v, %v; want held by %s with token %d and value leader-2", info, err, req.ID, l.Token())
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if info, err := r.Inspect(ctx, key); err != nil || info.Held || info.Value != "" {
		t.Errorf("after Release: Inspect = %+v, %v; want free, with no value", info, err)
	}
	for i, c := range g.raw {
		if f, err := c.HKeys(ctx, n.lock).Result(); err != nil || len(f) != 0 {
			t.Errorf("master %d: after Release the lock hash has %v, %v", i, f, err)
		}
	}
}
