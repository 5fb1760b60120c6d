package redis

import (
	"context"
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
)

// Benchmarks against the real server. Targets (not assertions): an
// uncontended acquire+release through the core within 1.3x of a raw
// SET NX PX + DEL, and a handoff to a blocked waiter with a p50 under 1 ms at
// 1 and 16 waiters.
//
//	go test -run '^$' -bench . -benchtime=2000x ./drivers/redis/

// cmdCounter is a go-redis hook that counts the commands a client sends,
// each command of a pipeline included. Pub/sub commands (SUBSCRIBE,
// UNSUBSCRIBE) go over the PubSub's own connection, which hooks do not see;
// serverCalls counts those on the server.
type cmdCounter struct{ n atomic.Int64 }

func (c *cmdCounter) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (c *cmdCounter) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *cmdCounter) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// serverCalls returns how many times the server ran each of cmds so far,
// from INFO commandstats.
func serverCalls(b *testing.B, rdb *goredis.Client, cmds ...string) int64 {
	b.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total int64
	for _, line := range strings.Split(info, "\n") {
		for _, c := range cmds {
			rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+c+":calls=")
			if !ok {
				continue
			}
			calls, _, _ := strings.Cut(rest, ",")
			n, _ := strconv.ParseInt(calls, 10, 64)
			total += n
		}
	}
	return total
}

// pingP50 returns the median round trip of a PING: the unit the handoff
// latencies are best read in (a handoff needs at least two round trips: the
// release, whose PUBLISH wakes the waiter, and the waiter's acquire).
func pingP50(b *testing.B, rdb *goredis.Client) time.Duration {
	b.Helper()
	rtts := make([]time.Duration, 200)
	for i := range rtts {
		t0 := time.Now()
		if err := rdb.Ping(context.Background()).Err(); err != nil {
			b.Fatal(err)
		}
		rtts[i] = time.Since(t0)
	}
	slices.Sort(rtts)
	return rtts[len(rtts)/2]
}

// newBenchClient returns a dlock Client over its own Driver on rdb, as one
// process of many would have, closed when b ends.
func newBenchClient(b *testing.B, rdb goredis.UniversalClient) *dlock.Client {
	b.Helper()
	d, err := New(rdb)
	if err != nil {
		b.Fatal(err)
	}
	c, err := dlock.New(d) // default TTL (15 s), renewal on
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func BenchmarkUncontended(b *testing.B) {
	rdb := newRDB(b)
	ctx := context.Background()
	m, err := newBenchClient(b, rdb).Mutex(testKey(b))
	if err != nil {
		b.Fatal(err)
	}
	d := newTestDriver(b, rdb)
	driverKey := testKey(b)
	rawKey := testKey(b)
	raw := func() {
		ok, err := rdb.SetNX(ctx, rawKey, "owner", dlock.DefaultTTL).Result()
		if err != nil || !ok {
			b.Fatalf("SET NX: %v %v", ok, err)
		}
		if err := rdb.Del(ctx, rawKey).Err(); err != nil {
			b.Fatal(err)
		}
	}
	tryLock := func() {
		l, err := m.TryLock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
	// The driver alone, without the core: what the driver costs over raw
	// commands, apart from the core's own work.
	driverOnly := func() {
		l, err := d.TryAcquire(ctx, driver.Request{Key: driverKey, ID: newID(), TTL: dlock.DefaultTTL})
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
	lock := func() {
		l, err := m.Lock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
	// Warm up: script cache (EVALSHA), pool connections, the pub/sub one.
	for range 10 {
		raw()
		driverOnly()
		tryLock()
		lock()
	}

	b.Run("raw-setnx-del", func(b *testing.B) {
		for b.Loop() {
			raw()
		}
	})
	b.Run("driver-tryacquire-release", func(b *testing.B) {
		for b.Loop() {
			driverOnly()
		}
	})
	b.Run("dlock-trylock-unlock", func(b *testing.B) {
		for b.Loop() {
			tryLock()
		}
	})
	b.Run("dlock-lock-unlock", func(b *testing.B) {
		for b.Loop() {
			lock()
		}
	})
	// The four interleaved in one loop, so that the ratios compare runs
	// under the same machine load, in an order rotated every iteration, so
	// that none always follows the release (and its PUBLISH) of another.
	// ns/op here is the sum of the four.
	b.Run("paired", func(b *testing.B) {
		names := []string{"raw", "driver", "trylock", "lock"}
		ops := []func(){raw, driverOnly, tryLock, lock}
		var took [4]time.Duration
		var sent [4]int64
		cmds := &cmdCounter{}
		rdb.AddHook(cmds)
		i := 0
		for b.Loop() {
			for j := range ops {
				k := (i + j) % len(ops)
				n0, t0 := cmds.n.Load(), time.Now()
				ops[k]()
				took[k] += time.Since(t0)
				sent[k] += cmds.n.Load() - n0
			}
			i++
		}
		n := float64(b.N)
		for k, name := range names {
			b.ReportMetric(float64(took[k].Nanoseconds())/n, name+"-ns")
			b.ReportMetric(float64(sent[k])/n, name+"-cmds")
			if k > 0 {
				b.ReportMetric(float64(took[k])/float64(took[0]), name+"/raw")
			}
		}
	})
}

// handoffHold is how long each holder keeps the lock before releasing it:
// long enough for every contender to be blocked in Lock (subscribed, its
// tries refused), so that each handoff goes to a waiting Lock call and not
// to a fresh TryAcquire. It is not part of the measured latency.
const handoffHold = 2 * time.Millisecond

// BenchmarkHandoff measures the time from just before a holder's Unlock to
// the return of a blocked waiter's Lock, with 1 and 16 waiters, each a
// Client of its own (as separate processes would be). One op is one
// handoff. It reports p50 and p99 of that latency, the commands each
// critical section cost (cmds/op, as the client hook sees them), the
// pub/sub (UN)SUBSCRIBE commands per op, counted on the server, and the
// median PING round trip measured afterwards, for scale.
func BenchmarkHandoff(b *testing.B) {
	for _, waiters := range []int{1, 16} {
		b.Run("waiters="+strconv.Itoa(waiters), func(b *testing.B) {
			benchHandoff(b, waiters)
		})
	}
}

func benchHandoff(b *testing.B, waiters int) {
	rdb := newRDB(b)
	admin := newRDB(b)
	cmds := &cmdCounter{}
	rdb.AddHook(cmds)
	key := testKey(b)
	mutexes := make([]dlock.Mutex, waiters+1)
	for i := range mutexes {
		m, err := newBenchClient(b, rdb).Mutex(key)
		if err != nil {
			b.Fatal(err)
		}
		mutexes[i] = m
	}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	base := time.Now()
	var (
		releasedAt atomic.Int64 // ns since base, stored just before Unlock; 0: none yet
		mu         sync.Mutex
		latencies  = make([]time.Duration, 0, b.N)
		acquired   = make(chan struct{}) // closed and replaced at every handoff
		wg         sync.WaitGroup
		ready      sync.WaitGroup
	)
	first, err := mutexes[0].Lock(ctx)
	if err != nil {
		b.Fatal(err)
	}
	ready.Add(waiters)
	participant := func(m dlock.Mutex, l dlock.Lease) {
		defer wg.Done()
		for {
			if l == nil {
				var err error
				l, err = m.Lock(ctx)
				if err != nil {
					return // stopped
				}
				now := time.Since(base)
				mu.Lock()
				if ctx.Err() != nil || len(latencies) == b.N {
					mu.Unlock()
					_ = l.Unlock(context.Background())
					return
				}
				latencies = append(latencies, now-time.Duration(releasedAt.Load()))
				done := len(latencies) == b.N
				close(acquired)
				acquired = make(chan struct{})
				mu.Unlock()
				if done {
					b.StopTimer()
					stop()
					_ = l.Unlock(context.Background())
					return
				}
			}
			time.Sleep(handoffHold)
			mu.Lock()
			handedOff := acquired
			mu.Unlock()
			releasedAt.Store(int64(time.Since(base)))
			if err := l.Unlock(context.Background()); err != nil {
				b.Error(err)
				stop()
				return
			}
			l = nil
			// Rejoin only once the lock has passed on, so that the next
			// handoff goes to a blocked waiter, not back to us.
			select {
			case <-handedOff:
			case <-ctx.Done():
				return
			}
		}
	}
	for _, m := range mutexes[1:] {
		wg.Add(1)
		go func() {
			ready.Done()
			participant(m, nil)
		}()
	}
	ready.Wait()
	time.Sleep(50 * time.Millisecond) // let the waiters block in Lock
	n0 := cmds.n.Load()
	s0 := serverCalls(b, admin, "subscribe", "unsubscribe")
	b.ResetTimer()
	wg.Add(1)
	go participant(mutexes[0], first)
	wg.Wait()
	b.StopTimer()
	n1 := cmds.n.Load()
	s1 := serverCalls(b, admin, "subscribe", "unsubscribe")

	if len(latencies) < b.N {
		b.Fatalf("%d handoffs of %d", len(latencies), b.N)
	}
	slices.Sort(latencies)
	pct := func(p float64) float64 {
		return float64(latencies[min(len(latencies)-1, int(p*float64(len(latencies))))].Nanoseconds())
	}
	b.ReportMetric(pct(0.50), "p50-ns")
	b.ReportMetric(pct(0.99), "p99-ns")
	b.ReportMetric(float64(pingP50(b, admin).Nanoseconds()), "ping-p50-ns")
	b.ReportMetric(float64(n1-n0)/float64(b.N), "cmds/op")
	b.ReportMetric(float64(s1-s0)/float64(b.N), "subs/op")
}

// BenchmarkContended16 runs 16 Clients taking and releasing one lock as fast
// as they can, with no hold: one op is one critical section. It reports the
// commands each one cost (cmds/op, client side, mostly refused tries of the
// waiters woken by each release) and the pub/sub (UN)SUBSCRIBE commands per
// op, counted on the server.
func BenchmarkContended16(b *testing.B) {
	const clients = 16
	rdb := newRDB(b)
	admin := newRDB(b)
	cmds := &cmdCounter{}
	rdb.AddHook(cmds)
	key := testKey(b)
	var mutexes []dlock.Mutex
	for range clients {
		m, err := newBenchClient(b, rdb).Mutex(key)
		if err != nil {
			b.Fatal(err)
		}
		mutexes = append(mutexes, m)
	}
	var left atomic.Int64
	left.Store(int64(b.N))
	n0 := cmds.n.Load()
	s0 := serverCalls(b, admin, "subscribe", "unsubscribe")
	b.ResetTimer()
	var wg sync.WaitGroup
	for _, m := range mutexes {
		wg.Go(func() {
			ctx := context.Background()
			for left.Add(-1) >= 0 {
				l, err := m.Lock(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				if err := l.Unlock(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(cmds.n.Load()-n0)/float64(b.N), "cmds/op")
	b.ReportMetric(float64(serverCalls(b, admin, "subscribe", "unsubscribe")-s0)/float64(b.N), "subs/op")
}
