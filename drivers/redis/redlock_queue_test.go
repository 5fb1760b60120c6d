package redis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

// requestCounter is a go-redis hook that counts the requests its clients
// send (a pipeline counts once), as the masters would see them, and, for
// the log, how many of each kind: a command's name, or a script's
// (scriptName) with the first number of its reply (acquire1 a grant,
// acquire0 a refusal, acquire alone an error).
type requestCounter struct {
	n     atomic.Int64
	mu    sync.Mutex
	kinds map[string]int
}

func (*requestCounter) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (c *requestCounter) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		c.n.Add(1)
		err := next(ctx, cmd)
		k := cmd.Name()
		if a := cmd.Args(); len(a) > 1 && k == "evalsha" {
			k = scriptName(a[1])
			if r, ok := cmd.(*goredis.Cmd); ok {
				if v, err := r.Int64Slice(); err == nil && len(v) > 0 {
					k += strconv.FormatInt(v[0], 10)
				}
			}
		}
		c.mu.Lock()
		if c.kinds == nil {
			c.kinds = map[string]int{}
		}
		c.kinds[k]++
		c.mu.Unlock()
		return err
	}
}

func (c *requestCounter) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}

// rlContention is the outcome of independent clients taking one lock in
// turns.
type rlContention struct {
	grants   int     // critical sections, in all
	requests float64 // requests to the masters per critical section
	fewest   int     // critical sections of the client that got the fewest
	stalled  bool    // the run had not ended 2 min after it started
	// wasted is the grants per critical section that did not make one:
	// attempts granted by a minority of masters (split votes), given back,
	// counted by their give-back requests.
	wasted float64
}

// contend runs clients independent RedLocks (each its own Client with its
// own connections to every master, as separate processes would be), made
// by open over counted go-redis clients, each locking and unlocking one
// key rounds times. It fails t when a Lock or Unlock call errs, and reports
// a run still unfinished after 2 minutes (a livelock that never hands the
// lock over) as stalled.
func (g *rlGroup) contend(t *testing.T, clients, rounds int, open func(t *testing.T, raw []goredis.UniversalClient) driver.Driver) rlContention {
	t.Helper()
	var counted requestCounter
	key := testkit.Key(t)
	mutexes := make([]dlock.Mutex, clients)
	for i := range clients {
		var raw []goredis.UniversalClient
		for _, a := range g.group.Addrs() {
			c := goredis.NewClient(&goredis.Options{Addr: a, ContextTimeoutEnabled: true, MaxRetries: -1, MaintNotificationsConfig: maintOff()})
			c.AddHook(&counted)
			t.Cleanup(func() { _ = c.Close() })
			raw = append(raw, c)
		}
		drv := open(t, raw)
		t.Cleanup(func() { _ = drv.Close() })
		mutexes[i] = testkit.Mutex(t, testkit.Client(t, drv, dlock.WithTTL(contendTTL)), key)
	}
	// The subscriptions, and the uncontended first grant, are not the
	// handoffs this measures: every client takes the lock once first.
	for _, m := range mutexes {
		l := testkit.Lock(t, ctxFor(t), m)
		if err := l.Unlock(ctxFor(t)); err != nil {
			t.Fatal(err)
		}
	}
	before := counted.n.Load()
	counted.mu.Lock()
	kinds0 := maps.Clone(counted.kinds)
	counted.mu.Unlock()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	counts := make([]int, clients)
	var stalled atomic.Bool
	var wg sync.WaitGroup
	for i, m := range mutexes {
		wg.Go(func() {
			for range rounds {
				l, err := m.Lock(ctx)
				if err != nil && ctx.Err() != nil {
					stalled.Store(true)
					return
				}
				if err != nil {
					t.Errorf("client %d: Lock: %v", i, err)
					return
				}
				counts[i]++
				if err := l.Unlock(ctx); err != nil {
					t.Errorf("client %d: Unlock: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	out := rlContention{fewest: counts[0], stalled: stalled.Load()}
	for _, c := range counts {
		out.grants += c
		out.fewest = min(out.fewest, c)
	}
	if out.grants > 0 {
		out.requests = float64(counted.n.Load()-before) / float64(out.grants)
		// Each critical section's Unlock releases on every master; the
		// releases beyond those, and the requeueing ones, give back
		// grants of failed attempts (the second phase writes back to too
		// few masters for the grants to be counted against it).
		counted.mu.Lock()
		givenBack := counted.kinds["release"] - kinds0["release"] - out.grants*len(g.group.Addrs())
		givenBack += counted.kinds["requeue-release"] - kinds0["requeue-release"]
		counted.mu.Unlock()
		out.wasted = float64(givenBack) / float64(out.grants)
	}
	counted.mu.Lock()
	perSection := map[string]string{}
	for k, v := range counted.kinds {
		if d := v - kinds0[k]; d > 0 && out.grants > 0 {
			perSection[k] = strconv.FormatFloat(float64(d)/float64(out.grants), 'f', 2, 64)
		}
	}
	counted.mu.Unlock()
	t.Logf("requests by kind per critical section: %v", perSection)
	t.Logf("%d clients, %d rounds each: %d critical sections, %.1f requests to the masters and %.2f grants given back each, fewest per client %d (%v), stalled %v",
		clients, rounds, out.grants, out.requests, out.wasted, out.fewest, counts, out.stalled)
	return out
}

// contendTTL and contendNodeTimeout are the contention runs' TTL and
// per-master timeout: wide, so that on a loaded machine no request times
// out (a timeout closes its connection, and the redials of 8 clients to 5
// masters, each a request that may time out in turn, can starve the run).
const contendTTL, contendNodeTimeout = 30 * time.Second, 5 * time.Second

// openCounted opens a RedLock over raw for a contention run.
func openCounted(t *testing.T, raw []goredis.UniversalClient) driver.Driver {
	r, err := NewRedLock(raw, WithNodeTimeout(contendNodeTimeout))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Independent clients contending for one lock are served in turn, through
// the waiters' queue the masters agree on: the masters' votes do not split
// (hardly any grant is given back for want of a majority), no client
// waits for ever, and the requests per critical section are logged (about
// 3.5 per master: the grant's first phase, the release, and the refused
// queued attempt with which a contended Lock joins the queue on every
// master, the second phase on 2 of 5; waiters' polls add to them on a
// slow machine, so they are not checked here).
func (g *rlGroup) testContendedClients(t *testing.T) {
	const clients, rounds = 8, 4
	got := g.contend(t, clients, rounds, openCounted)
	if got.stalled {
		t.Fatalf("%d clients taking a lock %d times each: not done 2 min later", clients, rounds)
	}
	if got.wasted > maxWasted {
		t.Errorf("%.2f grants given back per critical section, want at most %v: the masters' votes split among the waiters", got.wasted, maxWasted)
	}
}

// maxWasted bounds the grants given back per critical section with the
// queue: about 0.2 measured (a head's attempt that reaches a master before
// the release does), against 11 to 15 without it.
const maxWasted = 2

// Without the waiters' queue (every attempt of a waiting client sent as a
// TryLock's, as the driver did before it queued), the same contention
// splits the masters' votes: the check above catches a RedLock whose
// waiters are not served in turn.
func (g *rlGroup) testContendedClientsWithoutQueue(t *testing.T) {
	const clients, rounds = 8, 4
	got := g.contend(t, clients, rounds, func(t *testing.T, raw []goredis.UniversalClient) driver.Driver {
		return &unqueuedRedLock{openCounted(t, raw).(*RedLock)}
	})
	if !got.stalled && got.wasted <= maxWasted {
		t.Errorf("a RedLock without its queue: %.2f grants given back per critical section: the check of ContendedClients would not catch it", got.wasted)
	}
}

// unqueuedRedLock is a RedLock whose waiters do not queue: it sends every
// acquisition as a try (driver.Request.Wait unset).
type unqueuedRedLock struct{ *RedLock }

func (u *unqueuedRedLock) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	req.Wait = false
	return u.RedLock.Acquire(ctx, req)
}

// scriptName names the script whose SHA1 is sha, for requestCounter.
func scriptName(sha any) string {
	for name, sc := range map[string]*goredis.Script{
		"acquire": acquireScript, "queued-acquire": rlAcquireScript, "fence": fenceScript,
		"release": releaseScript, "requeue-release": rlRequeueScript, "leave": leaveScript, "extend": extendScript, "anyacquire": anyAcquireScript,
	} {
		if sc.Hash() == sha {
			return name
		}
	}
	return "script " + fmt.Sprint(sha)
}

// A failed acquisition is given back where it may hold: on the masters
// that granted it and those whose reply was lost, not on those that
// refused it (nothing of it is there).
func TestRedLockMayHold(t *testing.T) {
	lost := errors.New("i/o timeout")
	got := mayHold([]bool{true, false, false, true, false}, []error{nil, nil, lost, nil, nil})
	if want := []bool{true, false, true, true, false}; !slices.Equal(got, want) {
		t.Errorf("mayHold: got %v, want %v", got, want)
	}
	if got := mayHold(make([]bool, 3), make([]error, 3)); got != nil {
		t.Errorf("mayHold with every master refusing: got %v, want nil (nothing to release)", got)
	}
}

// A queued attempt that a majority refused is answered locally until the
// masters that refused it have woken the waiter in numbers that could now
// make a majority, or the masters' come-back time passes, and only then.
func TestRedLockQuietWaiter(t *testing.T) {
	const masters, quorum = 5, 3
	q := rlQueue{masters: masters, waits: map[string]*rlWait{}, subs: map[string]int{}}
	n := namesOf(DefaultKeyPrefix, "quiet")
	if _, quiet := q.start(n); quiet != 0 {
		t.Fatalf("before waiting: quiet %v, want 0", quiet)
	}
	first := q.ticket(n)
	if again := q.ticket(n); again != first {
		t.Fatalf("a second attempt of the same wait: ticket %d, want %d (its place)", again, first)
	}
	every := []bool{true, true, true, true, true}
	wakes, quiet := q.start(n)
	if quiet != 0 {
		t.Fatalf("first attempt: quiet %v, want 0", quiet)
	}
	q.refused(n, wakes, slices.Clone(every), quorum, time.Hour)
	if _, quiet := q.start(n); quiet <= 0 || quiet > time.Hour {
		t.Fatalf("after a refusal: quiet %v, want up to the come-back time of 1h", quiet)
	}
	// Refused by all five: three of them must have woken the waiter, each
	// counted once however many wake-ups it sent.
	for _, i := range []int{0, 0, 0, 1} {
		q.woke(n, i)
		if _, quiet := q.start(n); quiet == 0 {
			t.Fatalf("after wake-ups from masters 0 and 1 (the latest from %d) of the 5 that refused: quiet 0, want the refusal to stand (3 needed)", i)
		}
	}
	q.woke(n, 2)
	wakes, quiet = q.start(n)
	if quiet != 0 {
		t.Fatalf("after wake-ups from 3 of the 5 masters that refused: quiet %v, want 0 (ask the masters)", quiet)
	}
	// Refused by masters 0-2 only (3 and 4 granted, or did not answer):
	// one of the three suffices, and the others' wake-ups do not count.
	q.refused(n, wakes, []bool{true, true, true, false, false}, quorum, time.Hour)
	q.woke(n, 3)
	q.woke(n, 4)
	if _, quiet := q.start(n); quiet == 0 {
		t.Fatal("after wake-ups only from masters that did not refuse: quiet 0, want the refusal to stand")
	}
	q.woke(n, 1)
	wakes, quiet = q.start(n)
	if quiet != 0 {
		t.Fatalf("after a wake-up from one of 3 refusing masters, 2 others not refusing: quiet %v, want 0", quiet)
	}
	// Wake-ups during the attempt count: its refusal does not silence the
	// next attempt.
	for i := range 3 {
		q.woke(n, i)
	}
	q.refused(n, wakes, slices.Clone(every), quorum, time.Hour)
	if _, quiet := q.start(n); quiet != 0 {
		t.Fatalf("after a refusal with wake-ups from 3 masters during the attempt: quiet %v, want 0", quiet)
	}
	wakes, _ = q.start(n)
	q.refused(n, wakes, slices.Clone(every), quorum, time.Nanosecond)
	time.Sleep(time.Millisecond) // past a come-back time of 1 ns, not synchronisation
	if _, quiet := q.start(n); quiet != 0 {
		t.Fatalf("past the come-back time with no wake-up: quiet %v, want 0", quiet)
	}
	if !q.done(n) {
		t.Fatal("done: the wait was not recorded")
	}
	if next := q.ticket(n); next <= first {
		t.Fatalf("a new wait: ticket %d, want above the previous %d (the queue's tail)", next, first)
	}
}

// A queued attempt that only a minority granted is given back with the
// waiter's entry written back where the grants took it out: every master
// still names the waiter with the same ticket, so that the next waiter is
// not made head on those masters alone, to split their votes.
func (g *rlGroup) testFailedAttemptKeepsItsPlace(t *testing.T) {
	// Wide, so that on a loaded machine every master answers.
	const ttl = 30 * time.Second
	holder, waiter := g.open(t, "?node_timeout=5s"), g.open(t, "?node_timeout=5s")
	key := testkit.Key(t)
	n := namesOf(DefaultKeyPrefix, key)
	held := testkit.MustAcquire(t, ctxFor(t), holder, testkit.Request(key, ttl))
	defer func() { _ = held.Release(ctxFor(t)) }()
	for _, i := range []int{0, 1} { // the holder's lock gone from two masters
		if err := g.raw[i].Del(ctxFor(t), n.lock).Err(); err != nil {
			t.Fatal(err)
		}
	}
	req := testkit.Request(key, ttl)
	req.Wait = true
	if _, err := waiter.Acquire(ctxFor(t), req); !errors.Is(err, driver.ErrLocked) {
		t.Fatalf("a queued attempt granted by 2 of 5 masters: got %v, want ErrLocked", err)
	}
	refused := time.Now()
	var seq string
	for i, c := range g.raw {
		if got := g.holding(t, key, req.ID, i); got != 0 {
			t.Errorf("master %d still holds the failed attempt", i)
		}
		entry, err := c.HGet(ctxFor(t), n.waiters(), waiter.self).Result()
		if errors.Is(err, goredis.Nil) && time.Since(refused) > queueLife(ttl)/2 {
			// The entry lapses unless renewed: too slow a machine to tell
			// a lapsed entry from a missing one.
			t.Skipf("master %d: no queue entry, looked for %v after the attempt (entries last %v)", i, time.Since(refused).Round(time.Millisecond), queueLife(ttl))
		}
		if err != nil {
			t.Fatalf("master %d: the waiter's queue entry: %v", i, err)
		}
		s, _, _ := strings.Cut(entry, " ")
		if seq == "" {
			seq = s
		} else if s != seq {
			t.Errorf("master %d orders the waiter by %s, master 0 by %s: the masters disagree on its place", i, s, seq)
		}
	}
	if want := strconv.FormatUint(waiter.queue.ticket(n), 10); seq != want {
		t.Errorf("the waiter's place: %s, want its ticket %s", seq, want)
	}
}

// testRequestsPerSection logs the requests per critical section of 16 and
// 64 independent clients taking one lock in turns, by kind: a measurement,
// run with DLOCK_REDIS_COUNT=1. Each client's first contended Lock also
// dials its pub/sub connections (hello) and tries once unqueued (acquire0,
// as its last Lock did not wait): 1,024 sections make those a small part.
func (g *rlGroup) testRequestsPerSection(t *testing.T) {
	if os.Getenv("DLOCK_REDIS_COUNT") == "" {
		t.Skip("a measurement: set DLOCK_REDIS_COUNT=1 to run it")
	}
	for _, clients := range []int{16, 64} {
		g.contend(t, clients, 1024/clients, openCounted)
	}
}

// A queued waiter that a majority refused asks the masters again only once
// enough of the masters that refused it have woken it to make a majority
// with the others: counted in requests, with the wake-ups given by hand
// (as a master's message would, through rlQueue.woke), so that no message
// in flight blurs the counts.
func (g *rlGroup) testHeadWaitsForMajority(t *testing.T) {
	const ttl = 30 * time.Second // wide: on a loaded machine every master answers
	var counted requestCounter
	var raw []goredis.UniversalClient
	for _, a := range g.group.Addrs() {
		c := goredis.NewClient(&goredis.Options{Addr: a, ContextTimeoutEnabled: true, MaxRetries: -1, MaintNotificationsConfig: maintOff()})
		c.AddHook(&counted)
		t.Cleanup(func() { _ = c.Close() })
		raw = append(raw, c)
		if err := c.Ping(ctxFor(t)).Err(); err != nil { // dialled: no connection's setup is counted below
			t.Fatal(err)
		}
	}
	for _, c := range g.raw { // loaded, so that no attempt is counted twice (EVALSHA, then EVAL)
		for _, sc := range []*goredis.Script{rlAcquireScript, rlRequeueScript} {
			if err := sc.Load(ctxFor(t), c).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	waiter := openCounted(t, raw).(*RedLock)
	t.Cleanup(func() { _ = waiter.Close() })
	holder := g.open(t, "?node_timeout=5s")
	key := testkit.Key(t)
	n := namesOf(DefaultKeyPrefix, key)
	held := testkit.MustAcquire(t, ctxFor(t), holder, testkit.Request(key, ttl))
	defer func() { _ = held.Release(ctxFor(t)) }()
	req := testkit.Request(key, ttl)
	req.Wait = true
	attempt := func(what string, wantRequests int64) {
		t.Helper()
		before := counted.n.Load()
		if _, err := waiter.Acquire(ctxFor(t), req); !errors.Is(err, driver.ErrLocked) {
			t.Fatalf("%s: got %v, want ErrLocked", what, err)
		}
		if got := counted.n.Load() - before; got != wantRequests {
			t.Fatalf("%s: %d requests to the masters, want %d", what, got, wantRequests)
		}
	}
	attempt("the first queued attempt, the lock held on every master", 5)
	attempt("again with no wake-up", 0)
	waiter.queue.woke(n, 0)
	waiter.queue.woke(n, 0)
	waiter.queue.woke(n, 1)
	attempt("after wake-ups from 2 of the 5 masters that refused", 0)
	waiter.queue.woke(n, 4)
	attempt("after wake-ups from 3 of the 5 masters that refused", 5)
	attempt("again with no wake-up since", 0)

	// The holder's lock gone from masters 0 and 1: they grant, the others
	// refuse, and the grants are given back. One of the three that refused
	// now suffices, and wake-ups from the two that granted do not count.
	for _, i := range []int{0, 1} {
		if err := g.raw[i].Del(ctxFor(t), n.lock).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		waiter.queue.woke(n, i+2)
	}
	attempt("granted by 2 of 5 masters", 5+2) // the attempt, and the give-back on the 2
	waiter.queue.woke(n, 0)
	waiter.queue.woke(n, 1)
	attempt("after wake-ups from the 2 masters that granted", 0)
	waiter.queue.woke(n, 3)
	attempt("after a wake-up from 1 of the 3 that refused", 5+2)
}
