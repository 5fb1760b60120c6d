package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/conformance"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// TestRedLock runs everything RedLock against five independent Redis
// containers, started for this test only.
func TestRedLock(t *testing.T) {
	group := ownGroup(t, 5)
	g := &rlGroup{group: group}
	for _, a := range group.Addrs() {
		c := goredis.NewClient(&goredis.Options{Addr: a, ContextTimeoutEnabled: true, MaxRetries: -1, MaintNotificationsConfig: maintOff()})
		t.Cleanup(func() { _ = c.Close() })
		g.raw = append(g.raw, c)
	}

	t.Run("Conformance", g.testConformance)
	t.Run("MinorityDown", g.testMinorityDown)
	t.Run("MajorityDown", g.testMajorityDown)
	t.Run("SlowMajorityIsRefused", g.testSlowMajority)
	t.Run("TokensAcrossMasters", g.testTokensAcrossMasters)
	t.Run("SecondPhaseWritesWhatAMajorityNeeds", g.testSecondPhase)
	t.Run("ReentryAcrossMasters", g.testReentryAcrossMasters)
	t.Run("DuplicateMasters", g.testDuplicateMasters)
	t.Run("ExtendBatchAndInspect", g.testBatchAndInspect)
	t.Run("InspectReportsSettledHolds", g.testInspectSettled)
	t.Run("Election", func(t *testing.T) {
		checkElection(t, func(t *testing.T) driver.Driver { return g.open(t, "") })
	})
	t.Run("NoDoubleGrantUnderRandomDeadlines", func(t *testing.T) {
		checkNoDoubleGrant(t, func(t *testing.T) driver.Driver { return g.open(t, "") })
	})
	t.Run("NoGoroutineLeak", g.testNoGoroutineLeak)
	t.Run("FailedAttemptKeepsItsPlace", g.testFailedAttemptKeepsItsPlace)
	t.Run("LateTicketIsHead", g.testLateTicketIsHead)
	t.Run("HeadWaitsForMajority", g.testHeadWaitsForMajority)
	t.Run("ContendedClients", g.testContendedClients)
	t.Run("ContendedClientsWithoutQueue", g.testContendedClientsWithoutQueue)
	t.Run("RequestsPerSection", g.testRequestsPerSection)
}

// A RedLock's goroutines (its masters' pub/sub readers, its background
// subscriptions) end with Close, even with a master paused.
func (g *rlGroup) testNoGoroutineLeak(t *testing.T) {
	// Pausing masters goes through the Docker client, whose keep-alive
	// connections are not the RedLock's.
	defer goleak.VerifyNone(t, append(testserver.IgnoreOwnGoroutines(), goleak.IgnoreCurrent())...)
	g.down(t, true, 2)
	for range 2 {
		d, err := openRedLock(ctxFor(t), testkit.URL(t, g.group.RedLockURL()))
		if err != nil {
			t.Fatal(err)
		}
		var subs []driver.Subscription
		for i := range 3 {
			s, err := d.(*RedLock).Subscribe(ctxFor(t), "leak/"+strconv.Itoa(i))
			if err != nil {
				t.Fatal(err)
			}
			subs = append(subs, s)
		}
		_ = subs[0].Close()
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		for _, s := range subs {
			_ = s.Close()
		}
	}
}

type rlGroup struct {
	group *testserver.RedisGroup
	raw   []*goredis.Client // one per master, for looking behind the driver
}

func (g *rlGroup) open(t *testing.T, query string) *RedLock {
	t.Helper()
	if query == "" {
		// The default per-master timeout (a tenth of the TTL, at most
		// 100 ms) is for servers on a network; five masters sharing a
		// loaded 2-core machine with the tests stall past it (a batch
		// extension once timed out on 3 of 5 masters).
		query = "?node_timeout=500ms"
	}
	u := testkit.URL(t, g.group.RedLockURL()+query)
	return testkit.Closing(t, "openRedLock", func() (driver.Driver, error) { return openRedLock(ctxFor(t), u) }).(*RedLock)
}

// holders counts the masters whose lock hash for key has a hold of id.
func (g *rlGroup) holding(t *testing.T, key, id string, masters ...int) int {
	t.Helper()
	n := namesOf(DefaultKeyPrefix, key)
	count := 0
	for _, i := range masters {
		ok, err := g.raw[i].HExists(ctxFor(t), n.lock, "h:"+id).Result()
		if err != nil {
			t.Fatalf("master %d: %v", i, err)
		}
		if ok {
			count++
		}
	}
	return count
}

// down stops or pauses masters for the rest of the subtest.
func (g *rlGroup) down(t *testing.T, pause bool, masters ...int) {
	t.Helper()
	for _, i := range masters {
		s := g.group.Servers[i]
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		var err error
		if pause {
			err = s.Pause(ctx)
		} else {
			err = s.Stop(ctx)
		}
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if pause {
				err = s.Resume(ctx)
			} else {
				err = s.Start(ctx)
			}
			if err != nil {
				t.Error(err)
			}
		})
	}
}

func (g *rlGroup) testConformance(t *testing.T) {
	// Every operation is a round trip to five masters at once, and the
	// exclusion cases run 32 contending goroutines: on a loaded machine
	// running -race, the default TTL of 1 s (a per-master timeout of 100 ms,
	// a renewal attempt of 333 ms) lost grants whose fencing token came back
	// late and leases whose renewals did. A TTL of 2 s with a per-master
	// timeout of a quarter of it leaves both phases of an acquisition within
	// the TTL, as the driver requires, and each round trip 500 ms.
	const ttl = 2 * time.Second
	url := testkit.URL(t, g.group.RedLockURL()+"?node_timeout=500ms")
	conformance.Run(t, conformance.Harness{
		NewDriver: func(ctx context.Context) (driver.Driver, error) { return openRedLock(ctx, url) },
		TTL:       ttl,
		// An operator tampering with the lock does it on every master.
		Tamper: func(ctx context.Context, key string, overwrite bool) error {
			n := namesOf(DefaultKeyPrefix, key)
			for _, c := range g.raw {
				var err error
				if overwrite {
					err = c.Set(ctx, n.lock, "stranger", 0).Err()
				} else {
					err = c.Del(ctx, n.lock).Err()
				}
				if err != nil {
					return err
				}
			}
			return nil
		},
		// The partition cases cut one client off from every server.
		NewLinkedDriver: linkedOpener(t, url, openRedLockLinked),
		// The whole backend is every master.
		Faults: g.group.FaultHooks(),
	})
}

// One master paused and one stopped: the three others still grant, extend
// and release, and the lease's deadline counts from the call's start.
func (g *rlGroup) testMinorityDown(t *testing.T) {
	// Each call waits a second for the paused master: that leaves most of
	// the TTL, and gives the live masters room on a loaded machine (300 ms
	// was once too little for all three to answer an Extend in make
	// flakes).
	const ttl = 4 * time.Second
	r := g.open(t, "?node_timeout=1s")
	g.down(t, true, 1)
	g.down(t, false, 3)
	c := testkit.Client(t, r, dlock.WithTTL(ttl))
	key := testkit.Key(t)
	// The driver: validity is the TTL, counted from the call's start, and
	// the call waited for the paused master.
	started := time.Now()
	probe, err := r.Acquire(ctxFor(t), testkit.Request(testkit.Key(t), ttl))
	if err != nil {
		t.Fatalf("Acquire with 2 of 5 masters down: %v", err)
	}
	if took := time.Since(started); took < r.nodeTimeout(ttl) {
		t.Errorf("Acquire took %v, less than the per-master timeout: the paused master was not waited for", took)
	}
	if v := probe.Validity(); v != ttl {
		t.Errorf("Validity %v, want the TTL (counted from the call's start)", v)
	}
	if err := probe.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	// The core: the deadline counts from the attempt's start.
	m, _ := c.Mutex(key)
	started = time.Now()
	l, err := m.Lock(ctxFor(t))
	if err != nil {
		t.Fatalf("Lock with 2 of 5 masters down: %v", err)
	}
	if over := l.Deadline().Sub(started.Add(ttl)); over > 0 {
		t.Errorf("deadline %v past the call's start plus the TTL", over)
	}
	if left := time.Until(l.Deadline()); left < ttl/4 {
		t.Errorf("only %v of validity left after the acquisition", left)
	}
	id := ""
	n := namesOf(DefaultKeyPrefix, key)
	for f := range g.raw[0].HGetAll(ctxFor(t), n.lock).Val() {
		if s, ok := strings.CutPrefix(f, "h:"); ok {
			id = s
		}
	}
	if got := g.holding(t, key, id, 0, 2, 4); got != 3 {
		t.Fatalf("the lock is on %d of the 3 live masters, want 3", got)
	}
	if err := l.Extend(ctxFor(t)); err != nil {
		t.Fatalf("Extend with 2 of 5 masters down: %v", err)
	}
	if err := l.Unlock(ctxFor(t)); err != nil {
		t.Fatalf("Unlock with 2 of 5 masters down: %v", err)
	}
	if got := g.holding(t, key, id, 0, 2, 4); got != 0 {
		t.Fatalf("the lock is still on %d live masters after Unlock", got)
	}
}

// Three of five masters down: no grant, an error that is not ErrLocked, and
// nothing left on the two masters that answered.
func (g *rlGroup) testMajorityDown(t *testing.T) {
	r := g.open(t, "")
	g.down(t, true, 0, 2)
	g.down(t, false, 4)
	key := testkit.Key(t)
	req := testkit.Request(key, 2*time.Second)
	_, err := r.Acquire(ctxFor(t), req)
	if err == nil || errors.Is(err, driver.ErrLocked) {
		t.Fatalf("Acquire with 3 of 5 masters down: got %v, want an error other than ErrLocked", err)
	}
	t.Logf("Acquire with 3 of 5 masters down: %v", err)
	if got := g.holding(t, key, req.ID, 1, 3); got != 0 {
		t.Fatalf("the refused request left holds on %d of the reachable masters", got)
	}
	if n, err := g.raw[1].Exists(ctxFor(t), namesOf(DefaultKeyPrefix, key).lock).Result(); err != nil || n != 0 {
		t.Fatalf("the lock key exists on a reachable master: %d, %v", n, err)
	}
}

// A majority that grants only after the TTL's validity is used up is no
// grant: refused, and released everywhere.
func (g *rlGroup) testSlowMajority(t *testing.T) {
	r := g.open(t, "?node_timeout=300ms")
	g.down(t, true, 0) // the acquisition waits 300 ms for it
	key := testkit.Key(t)
	req := testkit.Request(key, 100*time.Millisecond)
	_, err := r.Acquire(ctxFor(t), req)
	if err == nil || errors.Is(err, driver.ErrLocked) || !strings.Contains(err.Error(), "TTL") {
		t.Fatalf("Acquire outliving its TTL: got %v, want an error saying the validity ran out", err)
	}
	if got := g.holding(t, key, req.ID, 1, 2, 3, 4); got != 0 {
		t.Fatalf("the expired grant was left on %d masters", got)
	}
}

// Fencing across masters: the token is the highest the majority issued,
// written back, so that the next grant on any other majority is above it,
// however far apart the masters' counters were.
func (g *rlGroup) testTokensAcrossMasters(t *testing.T) {
	r := g.open(t, "")
	key := testkit.Key(t)
	n := namesOf(DefaultKeyPrefix, key)
	ahead := uint64(time.Now().Add(24 * time.Hour).UnixMicro()) // a counter far ahead of the others
	if err := g.raw[4].Set(ctxFor(t), n.fence(), strconv.FormatUint(ahead, 10), 0).Err(); err != nil {
		t.Fatal(err)
	}
	first := mustAcquireRL(t, r, testkit.Request(key, 5*time.Second))
	if first.Token() != ahead+1 {
		t.Fatalf("token %d, want the highest issued, %d", first.Token(), ahead+1)
	}
	past := 0 // masters whose counters are past the token's block
	for _, c := range g.raw {
		if v, _ := c.Get(ctxFor(t), n.fence()).Uint64(); v >= first.Token()+tokenBlock-1 {
			past++
		}
	}
	if past < r.Quorum() {
		t.Errorf("%d masters' counters are past the block of token %d, want a majority (%d)", past, first.Token(), r.Quorum())
	}
	if err := first.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	g.down(t, false, 4) // the master with the high counter is gone
	second := mustAcquireRL(t, r, testkit.Request(key, 5*time.Second))
	if second.Token() <= first.Token() {
		t.Fatalf("token %d on another majority after %d: not increasing", second.Token(), first.Token())
	}
	if err := second.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
}

// A re-entry keeps its entry's token, even when it is a new grant on the
// masters that did not hold the first entry.
func (g *rlGroup) testReentryAcrossMasters(t *testing.T) {
	r, other := g.open(t, ""), g.open(t, "")
	key := testkit.Key(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	restart := func(f func(*testserver.Server, context.Context) error) {
		for _, i := range []int{3, 4} {
			if err := f(g.group.Servers[i], ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	restart((*testserver.Server).Stop)
	first := mustAcquireRL(t, r, reqOf(key, 10*time.Second, driver.Exclusive, "owner"))
	restart((*testserver.Server).Start)
	// Masters 3 and 4 now grant afresh, with counters that know nothing of
	// the first entry's token.
	again := mustAcquireRL(t, other, reqOf(key, 10*time.Second, driver.Exclusive, "owner"))
	if again.Token() != first.Token() {
		t.Fatalf("re-entry token %d, want the entry's %d", again.Token(), first.Token())
	}
	if _, err := other.Acquire(ctxFor(t), reqOf(key, time.Second, driver.Exclusive, "stranger")); !errors.Is(err, driver.ErrLocked) {
		t.Fatalf("a stranger while owner holds: %v", err)
	}
	for _, l := range []driver.Lease{first, again} {
		if err := l.Release(ctxFor(t)); err != nil {
			t.Fatal(err)
		}
	}
}

func (g *rlGroup) testDuplicateMasters(t *testing.T) {
	a := g.group.Addrs()
	_, port, _ := net.SplitHostPort(a[0])
	for _, u := range []string{
		fmt.Sprintf("redlock://%s,%s,%s/0", a[0], a[1], a[0]),
		fmt.Sprintf("redlock://%s,localhost:%s,%s/0", a[0], port, a[1]),
		fmt.Sprintf("redlock://%s,%s/0?addr=[::ffff:127.0.0.1]:%s", a[0], a[1], port),
	} {
		_, err := dlock.Open(ctxFor(t), u)
		if !errors.Is(err, dlock.ErrInvalidURL) {
			t.Errorf("Open(%s): got %v, want ErrInvalidURL", u, err)
		}
	}
	// Different names of one server, which only the run IDs tell apart.
	c1 := goredis.NewClient(&goredis.Options{Addr: a[0]})
	c2 := goredis.NewClient(&goredis.Options{Addr: a[0]})
	defer c1.Close()
	defer c2.Close()
	ids, errs := runIDs(ctxFor(t), []goredis.UniversalClient{c1, c2, g.raw[1]})
	if errors.Join(errs...) != nil || ids[0] == "" || ids[0] != ids[1] || ids[0] == ids[2] {
		t.Errorf("run IDs %v (%v): want the first two equal, the third different", ids, errs)
	}
	if _, err := NewRedLock([]goredis.UniversalClient{c1, c2}); err == nil {
		t.Error("NewRedLock over two clients of one address: want an error")
	}
	if _, err := NewRedLock([]goredis.UniversalClient{c1, c1}); err == nil {
		t.Error("NewRedLock over one client twice: want an error")
	}
	r, err := NewRedLock([]goredis.UniversalClient{g.raw[0], g.raw[1], g.raw[2]}, WithNodeTimeout(50*time.Millisecond))
	if err != nil || r.Masters() != 3 || r.Quorum() != 2 || r.nodeTimeout(time.Hour) != 50*time.Millisecond {
		t.Fatalf("NewRedLock over 3 masters: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := g.raw[0].Ping(ctxFor(t)).Err(); err != nil {
		t.Fatalf("Close closed the caller's client: %v", err)
	}
}

func (g *rlGroup) testBatchAndInspect(t *testing.T) {
	r := g.open(t, "")
	var leases []driver.Lease
	var ttls []time.Duration
	var keys []string
	for range 3 {
		key := testkit.Key(t)
		keys = append(keys, key)
		leases = append(leases, mustAcquireRL(t, r, reqOf(key, 10*time.Second, driver.Exclusive, "")))
		ttls = append(ttls, 20*time.Second)
	}
	// Tamper with lease 1 on a majority: it cannot be extended any more.
	n := namesOf(DefaultKeyPrefix, keys[1])
	for _, c := range g.raw[:3] {
		if err := c.Del(ctxFor(t), n.lock).Err(); err != nil {
			t.Fatal(err)
		}
	}
	errs := r.ExtendBatch(ctxFor(t), leases, ttls)
	if errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], driver.ErrNotHeld) {
		t.Fatalf("ExtendBatch: %v; want nil, ErrNotHeld, nil", errs)
	}
	if leases[0].Validity() != 20*time.Second {
		t.Errorf("validity after the batch: %v", leases[0].Validity())
	}
	info, err := r.Inspect(ctxFor(t), keys[0])
	if err != nil || !info.Held || info.Token != leases[0].Token() || info.TTL < 10*time.Second || info.Holders != 1 {
		t.Errorf("Inspect of a held lock: %+v, %v", info, err)
	}
	if info, err := r.Inspect(ctxFor(t), keys[1]); err != nil || info.Held {
		t.Errorf("Inspect of a lock on a minority: %+v, %v; want not held", info, err)
	}
	for _, i := range []int{0, 2} {
		if err := leases[i].Release(ctxFor(t)); err != nil {
			t.Fatal(err)
		}
	}
}

func mustAcquireRL(t *testing.T, r *RedLock, req driver.Request) driver.Lease {
	t.Helper()
	l, err := r.Acquire(ctxFor(t), req)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", req.Key, err)
	}
	return l
}
