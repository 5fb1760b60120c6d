package postgres

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/benchkit"
	"github.com/dlock-go/dlock/internal/benchtargets"
	"github.com/dlock-go/dlock/internal/testkit"
)

// The benchmarks compare dlock over this driver (through the core, as an
// application uses it: Mutex.Lock and Lease.Unlock) with raw
// pg_advisory_lock / pg_advisory_unlock on plain pgx connections, in the same
// run, so that the ratios hold whatever the machine's load:
//
//	go test -run '^$' -bench 'Uncontended|Handoff|Contended64' -benchtime 3s ./drivers/postgres/
//	go test -run '^$' -bench Suite -benchtime 1x ./drivers/postgres/   (the project's standard suite)
//
// Uncontended: one goroutine locks and unlocks one key, on one connection.
// Handoff: a holder unlocks while W others wait; the time from the start of
// the Unlock to the next holder's Lock returning, p50 and p99 (ms).
// Contended: 64 goroutines lock and unlock one key as fast as they can;
// critical sections per second.

func benchClient(b *testing.B, opts ...Option) *dlock.Client {
	b.Helper()
	return testkit.Client(b, newTestDriver(b, opts...), dlock.WithTTL(15*time.Second))
}

func benchConn(b *testing.B) *pgx.Conn {
	b.Helper()
	server.Need(b)
	c, err := pgx.Connect(context.Background(), server.URL)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// locker is one contender: dlock's Mutex, or a raw connection.
type locker interface {
	lock(ctx context.Context) error
	unlock(ctx context.Context) error
}

type dlockLocker struct {
	m dlock.Mutex
	l dlock.Lease
}

func (x *dlockLocker) lock(ctx context.Context) (err error) {
	x.l, err = x.m.Lock(ctx)
	return err
}

func (x *dlockLocker) unlock(ctx context.Context) error { return x.l.Unlock(ctx) }

type rawLocker struct {
	c  *pgx.Conn
	id int64
}

func (x *rawLocker) lock(ctx context.Context) error {
	_, err := x.c.Exec(ctx, "SELECT pg_advisory_lock($1)", x.id)
	return err
}

func (x *rawLocker) unlock(ctx context.Context) error {
	_, err := x.c.Exec(ctx, "SELECT pg_advisory_unlock($1)", x.id)
	return err
}

// lockers returns n contenders on one key of kind "dlock" (one Client,
// shared as an application would) or "raw" (one connection each).
func lockers(b *testing.B, kind string, n int) []locker {
	key := testkit.Key(b)
	out := make([]locker, n)
	switch kind {
	case "dlock":
		c := benchClient(b, WithMaxConns(max(n, 2)))
		m := testkit.Mutex(b, c, key)
		for i := range out {
			out[i] = &dlockLocker{m: m}
		}
	case "raw":
		for i := range out {
			out[i] = &rawLocker{c: benchConn(b), id: KeyID(key)}
		}
	}
	// Warm up: connections made, statements prepared.
	var wg sync.WaitGroup
	for _, x := range out {
		wg.Go(func() {
			if err := x.lock(context.Background()); err != nil {
				b.Error(err)
				return
			}
			if err := x.unlock(context.Background()); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	return out
}

// BenchmarkUncontended alternates raw and dlock lock+unlock pairs in one
// loop, so that both see the same load, and reports each one's median and
// their ratio (medians, as a loaded machine's outliers swamp means).
func BenchmarkUncontended(b *testing.B) {
	raw, dl := lockers(b, "raw", 1)[0], lockers(b, "dlock", 1)[0]
	ctx := context.Background()
	rawTimes := make([]time.Duration, 0, b.N)
	dlockTimes := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		for _, x := range []locker{raw, dl} {
			start := time.Now()
			if err := x.lock(ctx); err != nil {
				b.Fatal(err)
			}
			if err := x.unlock(ctx); err != nil {
				b.Fatal(err)
			}
			if x == raw {
				rawTimes = append(rawTimes, time.Since(start))
			} else {
				dlockTimes = append(dlockTimes, time.Since(start))
			}
		}
	}
	b.StopTimer()
	slices.Sort(rawTimes)
	slices.Sort(dlockTimes)
	rawP50, dlockP50 := rawTimes[len(rawTimes)/2], dlockTimes[len(dlockTimes)/2]
	b.ReportMetric(float64(rawP50.Microseconds()), "raw-p50-us")
	b.ReportMetric(float64(dlockP50.Microseconds()), "dlock-p50-us")
	b.ReportMetric(float64(dlockP50)/float64(rawP50), "x-raw")
}

func BenchmarkHandoff(b *testing.B) {
	for _, waiters := range []int{1, 16} {
		for _, kind := range []string{"raw", "dlock"} {
			b.Run(fmt.Sprintf("waiters=%d/%s", waiters, kind), func(b *testing.B) {
				handoff(b, lockers(b, kind, waiters+1))
			})
		}
	}
}

// handoff passes the lock b.N times among xs, every other contender waiting
// meanwhile, and reports the handoff latency's percentiles.
func handoff(b *testing.B, xs []locker) {
	ctx := context.Background()
	var (
		released  atomic.Int64 // UnixNano of the start of the latest Unlock
		remaining atomic.Int64
		mu        sync.Mutex
		samples   = make([]time.Duration, 0, b.N)
	)
	remaining.Store(int64(b.N))
	b.ResetTimer()
	var wg sync.WaitGroup
	for _, x := range xs {
		wg.Go(func() {
			for {
				if err := x.lock(ctx); err != nil {
					b.Error(err)
					return
				}
				if r := released.Load(); r != 0 {
					mu.Lock()
					samples = append(samples, time.Since(time.Unix(0, r)))
					mu.Unlock()
				}
				last := remaining.Add(-1) < 0
				if last {
					released.Store(0)
				} else {
					released.Store(time.Now().UnixNano())
				}
				if err := x.unlock(ctx); err != nil {
					b.Error(err)
					return
				}
				if last || remaining.Load() < 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if len(samples) == 0 {
		return
	}
	slices.Sort(samples)
	pct := func(p float64) float64 {
		return float64(samples[int(p*float64(len(samples)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}

func BenchmarkContended64(b *testing.B) {
	const goroutines = 64
	for _, kind := range []string{"raw", "dlock"} {
		b.Run(kind, func(b *testing.B) {
			xs := lockers(b, kind, goroutines)
			ctx := context.Background()
			var remaining atomic.Int64
			remaining.Store(int64(b.N))
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for _, x := range xs {
				wg.Go(func() {
					for remaining.Add(-1) >= 0 {
						if err := x.lock(ctx); err != nil {
							b.Error(err)
							return
						}
						if err := x.unlock(ctx); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "cs/s")
		})
	}
}

// BenchmarkSuite runs the project's standard measurements (internal/benchkit)
// against the test server, comparing uncontended locks with raw
// pg_advisory_lock + pg_advisory_unlock on one pgx connection in the same run.
// The held-locks measurement holds 50 locks, not 10,000: the driver gives
// every held lock a connection of its own (see "Connections" in the package
// documentation). Target: uncontended within 1.2x raw.
//
//	make bench   (or: go test -run '^$' -bench Suite -benchtime 1x ./drivers/postgres/)
func BenchmarkSuite(b *testing.B) {
	server.Need(b)
	benchkit.RunOn(b, func() (benchkit.Target, func(), error) { return benchtargets.Postgres(b.Context(), server.URL) })
}
