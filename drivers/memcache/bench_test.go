package memcache

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
)

// The benchmarks compare the driver with raw gomemcache calls on the same
// server in the same run (compare ratios, not absolute times across runs).
// Requests are counted on the wire (see wire), so the counts include every
// request the core and the driver make.
//
//	go test -run XXX -bench . -benchtime 2000x ./drivers/memcache/

// BenchmarkUncontended times one lock and unlock with no contention: raw
// add + delete (two requests, no owner check, no token), then the driver
// through the core (Mutex.Lock + Lease.Unlock: add + incr, gets + cas), on
// the same client, alternating so that both see the same load.
func BenchmarkUncontended(b *testing.B) {
	var w wire
	mc := w.client(b, server.URL)
	benchUncontended(b, &w, mc, newTestDriver(b, mc), "req")
}

// benchUncontended alternates a raw add + delete with a Lock and Unlock
// through d (over mc, whose requests w counts), and reports both, with
// what w counts per op under the name unit.
func benchUncontended(b *testing.B, w *wire, mc *gomemcache.Client, d *Driver, unit string) {
	c := testkit.Client(b, d, dlock.WithTTL(15*time.Second))
	key := testkit.Key(b)
	m := testkit.Mutex(b, c, key)
	rawKey := namesOf("bench-raw:", key).lock
	ctx := context.Background()
	var raw, lib time.Duration
	var rawReqs, libReqs int64
	for b.Loop() {
		r0, t0 := w.requests.Load(), time.Now()
		if err := mc.Add(&gomemcache.Item{Key: rawKey, Value: []byte("x"), Expiration: 15}); err != nil {
			b.Fatal(err)
		}
		if err := mc.Delete(rawKey); err != nil {
			b.Fatal(err)
		}
		r1, t1 := w.requests.Load(), time.Now()
		l := testkit.Lock(b, ctx, m)
		if err := l.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
		raw += t1.Sub(t0)
		lib += time.Since(t1)
		rawReqs += r1 - r0
		libReqs += w.requests.Load() - r1
	}
	n := float64(b.N)
	b.ReportMetric(float64(raw.Microseconds())/n, "raw-µs/op")
	b.ReportMetric(float64(lib.Microseconds())/n, "dlock-µs/op")
	b.ReportMetric(float64(lib)/float64(raw), "ratio")
	b.ReportMetric(float64(rawReqs)/n, "raw-"+unit+"/op")
	b.ReportMetric(float64(libReqs)/n, "dlock-"+unit+"/op")
}

// BenchmarkHandoff runs 16 workers, each with a client of its own as 16
// processes would have, taking one lock in turn (a critical section of
// 100 µs) until b.N sections have run, with no pause between a worker's
// sections (think=0: the releaser competes at once) or 2 ms of work outside
// the lock. It reports the handoff latency (from the start of a holder's
// unlock to the next holder's lock returning) when the lock passes to
// another worker, the share of sections taken again by the worker that just
// released (barging), the requests per critical section, and Jain's
// fairness index over the workers' sections. "raw" is the naive lock:
// add in a loop every millisecond, delete to release.
func BenchmarkHandoff(b *testing.B) {
	const workers = 16
	for _, think := range []time.Duration{0, 2 * time.Millisecond} {
		b.Run("think="+think.String()+"/dlock", func(b *testing.B) {
			var w wire
			key := testkit.Key(b)
			lockers := make([]func(context.Context) (func(), error), workers)
			for i := range lockers {
				c := testkit.Client(b, newTestDriver(b, w.client(b, server.URL)), dlock.WithTTL(15*time.Second))
				m := testkit.Mutex(b, c, key)
				lockers[i] = func(ctx context.Context) (func(), error) {
					l, err := m.Lock(ctx)
					if err != nil {
						return nil, err
					}
					return func() { _ = l.Unlock(ctx) }, nil
				}
			}
			runHandoff(b, &w, lockers, think)
		})
		b.Run("think="+think.String()+"/raw", func(b *testing.B) {
			var w wire
			name := namesOf("bench-raw:", testkit.Key(b)).lock
			lockers := make([]func(context.Context) (func(), error), workers)
			for i := range lockers {
				mc := w.client(b, server.URL)
				lockers[i] = func(ctx context.Context) (func(), error) {
					for {
						err := mc.Add(&gomemcache.Item{Key: name, Value: []byte("x"), Expiration: 15})
						if err == nil {
							return func() { _ = mc.Delete(name) }, nil
						}
						if !errors.Is(err, gomemcache.ErrNotStored) {
							return nil, err
						}
						select {
						case <-ctx.Done():
							return nil, ctx.Err()
						case <-time.After(time.Millisecond):
						}
					}
				}
			}
			runHandoff(b, &w, lockers, think)
		})
	}
}

// runHandoff runs the workers of BenchmarkHandoff over lockers (each takes
// the lock and returns its unlock), each pausing for think between its
// sections, and reports the metrics.
func runHandoff(b *testing.B, w *wire, lockers []func(context.Context) (func(), error), think time.Duration) {
	ctx := context.Background()
	var (
		mu          sync.Mutex
		releasedAt  time.Time
		lastHolder  = -1
		handoffs    []time.Duration
		barged      int
		sections    atomic.Int64
		failed      atomic.Value
		perWorker   = make([]int, len(lockers))
		requestsAt0 = w.requests.Load()
	)
	b.ResetTimer()
	var wg sync.WaitGroup
	for i, lock := range lockers {
		wg.Go(func() {
			for sections.Add(1) <= int64(b.N) {
				unlock, err := lock(ctx)
				if err != nil {
					failed.Store(err)
					return
				}
				now := time.Now()
				mu.Lock()
				switch {
				case lastHolder == i:
					barged++
				case lastHolder >= 0:
					handoffs = append(handoffs, now.Sub(releasedAt))
				}
				lastHolder = i
				perWorker[i]++
				mu.Unlock()
				time.Sleep(100 * time.Microsecond) // the critical section's work
				mu.Lock()
				releasedAt = time.Now()
				mu.Unlock()
				unlock()
				if think > 0 {
					time.Sleep(think) // work outside the lock
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	n := float64(b.N)
	b.ReportMetric(float64(w.requests.Load()-requestsAt0)/n, "req/section")
	b.ReportMetric(100*float64(barged)/n, "barged-%")
	if len(handoffs) > 0 {
		slices.Sort(handoffs)
		pct := func(p float64) float64 {
			return float64(handoffs[int(p*float64(len(handoffs)-1))].Microseconds()) / 1000
		}
		b.ReportMetric(pct(0.5), "handoff-p50-ms")
		b.ReportMetric(pct(0.99), "handoff-p99-ms")
	}
	// Jain's fairness index over the sections each worker got: 1 is fair.
	var sum, sumSq float64
	for _, k := range perWorker {
		sum += float64(k)
		sumSq += float64(k) * float64(k)
	}
	b.ReportMetric(sum*sum/(float64(len(perWorker))*sumSq), "jain")
}
