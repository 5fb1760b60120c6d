package redis

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

// The second phase writes the token to the fewest granting masters that,
// with those whose own grant already reserved its block, make a majority
// (one at least, to settle the hold), below-token masters first, and keeps
// the others for a second round.
func TestRedLockFenceTargets(t *testing.T) {
	every := []bool{true, true, true, true, true}
	for _, tc := range []struct {
		name        string
		tokens      []uint64
		granted     []bool
		token       uint64
		first, rest []bool
		covered     int
	}{
		{"all five granted, one issued the token", []uint64{10, 20, 30, 40, 50}, every, 50,
			[]bool{true, true, false, false, false}, []bool{false, false, true, true, true}, 1},
		{"the issuer first in line", []uint64{50, 20, 30, 40, 10}, every, 50,
			[]bool{false, true, true, false, false}, []bool{true, false, false, true, true}, 1},
		{"two issued the token", []uint64{50, 20, 50, 40, 10}, every, 50,
			[]bool{false, true, false, false, false}, []bool{true, false, true, true, true}, 2},
		{"a re-entry: every master has the token", []uint64{50, 50, 50, 50, 50}, every, 50,
			[]bool{true, false, false, false, false}, []bool{false, true, true, true, true}, 5},
		{"a bare majority", []uint64{10, 0, 30, 0, 50}, []bool{true, false, true, false, true}, 50,
			[]bool{true, false, true, false, false}, []bool{false, false, false, false, true}, 1},
		{"a master above a re-entry's token", []uint64{50, 60, 10, 0, 0}, []bool{true, true, true, false, false}, 50,
			[]bool{false, false, true, false, false}, []bool{true, true, false, false, false}, 2},
	} {
		grants := make([]grant, len(tc.tokens))
		for i, tok := range tc.tokens {
			grants[i] = grant{ok: tc.granted[i], token: tok}
		}
		first, rest, covered := fenceTargets(grants, tc.granted, tc.token, 3)
		if !slices.Equal(first, tc.first) || !slices.Equal(rest, tc.rest) || covered != tc.covered {
			t.Errorf("%s: first %v, rest %v, covered %d; want %v, %v, %d", tc.name, first, rest, covered, tc.first, tc.rest, tc.covered)
		}
	}
}

// Inspect's majority: a pending hold counts with its holder's settled
// hold when its token is no higher, and never makes a hold that no master
// settled.
func TestRedLockMergeViews(t *testing.T) {
	const quorum = 3
	view := func(settled bool, owner string, token uint64) inspectView {
		return inspectView{settled: settled, info: driver.Info{Held: true, Holders: 1, Owner: owner, Token: token, TTL: time.Minute}}
	}
	free := inspectView{info: driver.Info{Token: 99}}
	for _, tc := range []struct {
		name  string
		views []inspectView
		held  bool
		token uint64
	}{
		{"pending everywhere", []inspectView{view(false, "a", 50), view(false, "a", 50), view(false, "a", 40), free}, false, 99},
		{"settled on one, pending lower on two", []inspectView{view(true, "a", 50), view(false, "a", 50), view(false, "a", 40), free}, true, 50},
		{"settled on one, the pending ones above it", []inspectView{view(true, "a", 50), view(false, "a", 60), view(false, "a", 70)}, false, 0},
		{"settled on one, pending of another holder", []inspectView{view(true, "a", 50), view(false, "b", 40), view(false, "b", 30)}, false, 0},
		{"two settled holds of one holder: a pending one joins neither",
			[]inspectView{view(true, "a", 50), view(true, "a", 50), view(true, "a", 60), view(false, "a", 40)}, false, 0},
		{"settled on a quorum", []inspectView{view(true, "a", 50), view(true, "a", 50), view(true, "a", 50), view(false, "b", 70)}, true, 50},
	} {
		got := mergeViews(tc.views, quorum)
		if got.Held != tc.held || (tc.held && (got.Owner != "a" || got.Token != tc.token)) || (!tc.held && tc.token != 0 && got.Token != tc.token) {
			t.Errorf("%s: %+v; want held %v with token %d", tc.name, got, tc.held, tc.token)
		}
	}
}

// An acquisition that every master grants writes its token back to two of
// them, which with the master that issued it make a majority: 7 requests
// to the masters where the second phase used to take 10, and the next
// grant, on a majority of which only one master knows the token, is above
// its block.
//
// When a master it writes to fails to acknowledge, it writes to the other
// granting masters in a second round, and the grant stands with a
// majority of counters past the block.
func (g *rlGroup) testSecondPhase(t *testing.T) {
	var counted requestCounter
	var raw []goredis.UniversalClient
	failing := &failFence{}
	for i, a := range g.group.Addrs() {
		c := goredis.NewClient(&goredis.Options{Addr: a, ContextTimeoutEnabled: true, MaxRetries: -1, MaintNotificationsConfig: maintOff()})
		c.AddHook(&counted)
		if i == 0 {
			c.AddHook(failing)
		}
		t.Cleanup(func() { _ = c.Close() })
		raw = append(raw, c)
		if err := c.Ping(ctxFor(t)).Err(); err != nil { // dialled: no connection's setup is counted below
			t.Fatal(err)
		}
	}
	for _, c := range g.raw { // loaded, so that no request is counted twice (EVALSHA, then EVAL)
		for _, sc := range []*goredis.Script{acquireScript, fenceScript} {
			if err := sc.Load(ctxFor(t), c).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	r := openCounted(t, raw).(*RedLock)
	t.Cleanup(func() { _ = r.Close() })
	key := testkit.Key(t)
	n := namesOf(DefaultKeyPrefix, key)
	// Counters above the servers' clocks (in µs), so that each master's
	// next token is its counter plus one: master 4 issues the highest.
	base := uint64(1) << 52
	setCounters := func() {
		t.Helper()
		for i, c := range []uint64{base, base + 10, base + 20, base + 30, base + 1000} {
			if err := g.raw[i].Set(ctxFor(t), n.fence(), strconv.FormatUint(c, 10), 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(func() {
		for _, c := range g.raw {
			_ = c.Del(ctxFor(t), n.lock, n.fence()).Err()
		}
	})
	// pastBlock reports which masters' counters are past the block of
	// token.
	pastBlock := func(token uint64) []bool {
		t.Helper()
		var past []bool
		for _, c := range g.raw {
			v, err := c.Get(ctxFor(t), n.fence()).Uint64()
			if err != nil {
				t.Fatal(err)
			}
			past = append(past, v >= token+tokenBlock-1)
		}
		return past
	}

	// Master 0 fails the write-back: masters 2 to 4 get it in a second
	// round (master 4, which issued the token, only has its hold settled).
	setCounters()
	failing.on.Store(true)
	before := counted.n.Load()
	l := mustAcquireRL(t, r, testkit.Request(key, 30*time.Second))
	failing.on.Store(false)
	if got := counted.n.Load() - before; got != 5+2+3 {
		t.Errorf("an acquisition whose write-back failed on master 0: %d requests to the masters, want 10 (5 grants, 2 write-backs, then 3)", got)
	}
	if want := []bool{false, true, true, true, true}; l.Token() != base+1001 || !slices.Equal(pastBlock(l.Token()), want) {
		t.Fatalf("token %d, counters past its block %v; want %d, %v", l.Token(), pastBlock(l.Token()), base+1001, want)
	}
	if err := l.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}

	setCounters()
	before = counted.n.Load()
	first := mustAcquireRL(t, r, testkit.Request(key, 30*time.Second))
	if got := counted.n.Load() - before; got != 5+2 {
		t.Errorf("an acquisition granted by every master: %d requests to the masters, want 7 (5 grants, 2 write-backs)", got)
	}
	if first.Token() != base+1001 {
		t.Fatalf("token %d, want the highest issued, %d", first.Token(), base+1001)
	}
	end := first.Token() + tokenBlock - 1
	if want := []bool{true, true, false, false, true}; !slices.Equal(pastBlock(first.Token()), want) {
		t.Fatalf("masters whose counters are past the token's block: %v, want %v", pastBlock(first.Token()), want)
	}
	if info, err := r.Inspect(ctxFor(t), key); err != nil || !info.Held || info.Token != first.Token() {
		t.Errorf("Inspect: %+v, %v; want held with token %d", info, err, first.Token())
	}
	if err := first.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	// The next grant by masters 1 to 3: master 1 alone knows the token.
	for _, i := range []int{0, 4} {
		if err := g.raw[i].Set(ctxFor(t), n.lock, "a stranger's", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	second := mustAcquireRL(t, r, testkit.Request(key, 30*time.Second))
	if second.Token() <= end {
		t.Errorf("token %d on masters 1 to 3 after %d: not past its block (%d)", second.Token(), first.Token(), end)
	}
	if err := second.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
}

// failFence is a go-redis hook that fails the fence script, without
// sending it, while on is set.
type failFence struct{ on atomic.Bool }

func (*failFence) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (f *failFence) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if a := cmd.Args(); f.on.Load() && len(a) > 1 && cmd.Name() == "evalsha" && a[1] == fenceScript.Hash() {
			err := errors.New("failFence: the write-back fails")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

func (*failFence) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}
