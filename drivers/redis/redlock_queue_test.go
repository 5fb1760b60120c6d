package redis

import (
	"context"
	"errors"
	"fmt"
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
	stalled  bool    // a Lock call still waited 30 s after the run's end
}

// contend runs clients independent RedLocks (each its own Client with its
// own connections to every master, as separate processes would be), made
// by open over counted go-redis clients, each locking and unlocking one
// key for d. It fails t when a Lock or Unlock call errs, and reports a run
// in which a Lock call still waited 30 s after d (a livelock that never
// hands the lock over) as stalled.
func (g *rlGroup) contend(t *testing.T, clients int, d time.Duration, open func(t *testing.T, raw []goredis.UniversalClient) driver.Driver) rlContention {
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
		mutexes[i] = testkit.Mutex(t, testkit.Client(t, drv, dlock.WithTTL(8*time.Second)), key)
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
	ctx, cancel := context.WithTimeout(t.Context(), d+30*time.Second)
	defer cancel()
	end := time.Now().Add(d)
	counts := make([]int, clients)
	var stalled atomic.Bool
	var wg sync.WaitGroup
	for i, m := range mutexes {
		wg.Go(func() {
			for time.Now().Before(end) {
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
	}
	counted.mu.Lock()
	t.Logf("requests by kind: %v", counted.kinds)
	counted.mu.Unlock()
	t.Logf("%d clients, %v: %d critical sections, %.1f requests to the masters each, fewest per client %d (%v), stalled %v",
		clients, d, out.grants, out.requests, out.fewest, counts, out.stalled)
	return out
}

// openCounted opens a RedLock over raw with the tests' per-master timeout.
func openCounted(t *testing.T, raw []goredis.UniversalClient) driver.Driver {
	r, err := NewRedLock(raw, WithNodeTimeout(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Independent clients contending for one lock are served in turn, through
// the waiters' queue the masters agree on: each critical section costs a
// handful of requests per master (the grant's two phases, the release, the
// next head's attempt), not a herd of attempts whose votes split, and no
// client is starved. The bound leaves room for the waiters' polls and the
// occasional attempt that reaches a master before the release does.
func (g *rlGroup) testContendedClients(t *testing.T) {
	const clients = 8
	masters := len(g.group.Addrs())
	got := g.contend(t, clients, 3*time.Second, openCounted)
	if got.stalled {
		t.Fatalf("%d clients contending for 3 s: a Lock call still waited 30 s later", clients)
	}
	if got.grants < clients {
		t.Fatalf("%d critical sections for %d clients in 3 s", got.grants, clients)
	}
	if limit := float64(8 * masters); got.requests > limit {
		t.Errorf("%.1f requests per critical section, want at most %v (8 per master): waiters are not served in turn", got.requests, limit)
	}
	if got.fewest == 0 {
		t.Errorf("a client got no critical section in 3 s while %d others got %d", clients-1, got.grants)
	}
}

// Without the waiters' queue (every attempt of a waiting client sent as a
// TryLock's, as the driver did before it queued), the same contention
// spends far more requests per critical section: the check above catches
// a RedLock whose waiters are not served in turn.
func (g *rlGroup) testContendedClientsWithoutQueue(t *testing.T) {
	const clients = 8
	masters := len(g.group.Addrs())
	got := g.contend(t, clients, 3*time.Second, func(t *testing.T, raw []goredis.UniversalClient) driver.Driver {
		return &unqueuedRedLock{openCounted(t, raw).(*RedLock)}
	})
	if !got.stalled && got.fewest > 0 && got.requests <= float64(8*masters) {
		t.Errorf("a RedLock without its queue: %.1f requests per critical section, none starved: the check of ContendedClients would not catch it", got.requests)
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
		"release": releaseScript, "requeue-release": rlRequeueScript, "leave": leaveScript, "extend": extendScript,
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

// A queued attempt that a majority refused is answered locally until a
// wake-up arrives or the masters' come-back time passes, and only then.
func TestRedLockQuietWaiter(t *testing.T) {
	q := rlQueue{waits: map[string]*rlWait{}, subs: map[string]int{}}
	n := namesOf(DefaultKeyPrefix, "quiet")
	if _, quiet := q.start(n); quiet != 0 {
		t.Fatalf("before waiting: quiet %v, want 0", quiet)
	}
	first := q.ticket(n)
	if again := q.ticket(n); again != first {
		t.Fatalf("a second attempt of the same wait: ticket %d, want %d (its place)", again, first)
	}
	wakes, quiet := q.start(n)
	if quiet != 0 {
		t.Fatalf("first attempt: quiet %v, want 0", quiet)
	}
	q.refused(n, wakes, time.Hour)
	if _, quiet := q.start(n); quiet <= 0 || quiet > time.Hour {
		t.Fatalf("after a refusal: quiet %v, want up to the come-back time of 1h", quiet)
	}
	q.woke(n)
	wakes, quiet = q.start(n)
	if quiet != 0 {
		t.Fatalf("after a wake-up: quiet %v, want 0 (ask the masters)", quiet)
	}
	// A wake-up during the attempt: its refusal does not silence the next.
	q.woke(n)
	q.refused(n, wakes, time.Hour)
	if _, quiet := q.start(n); quiet != 0 {
		t.Fatalf("after a refusal with a wake-up during the attempt: quiet %v, want 0", quiet)
	}
	wakes, _ = q.start(n)
	q.refused(n, wakes, time.Nanosecond)
	time.Sleep(time.Millisecond) // past a come-back time of 1 ns, not synchronisation
	if _, quiet := q.start(n); quiet != 0 {
		t.Fatalf("past the come-back time: quiet %v, want 0", quiet)
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
	const ttl = 4 * time.Second
	holder, waiter := g.open(t, ""), g.open(t, "")
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
	var seq string
	for i, c := range g.raw {
		if got := g.holding(t, key, req.ID, i); got != 0 {
			t.Errorf("master %d still holds the failed attempt", i)
		}
		entry, err := c.HGet(ctxFor(t), n.waiters(), waiter.self).Result()
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
