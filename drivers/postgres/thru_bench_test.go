package postgres

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/benchkit"
	"github.com/dlock-go/dlock/internal/testkit"
)

// BenchmarkIndependent64 is the contended run of bench/peers, in the test
// process: 64 contenders on one key, each an independent dlock Client over
// a Driver of its own ("dlock"), or a raw pgx connection doing
// pg_advisory_lock / pg_advisory_unlock ("raw"). Besides the rate (which is
// noisy on a loaded machine), it reports what a critical section costs,
// counted rather than timed where it can:
//
//   - stmts/cs: statements the server ran (pg_stat_statements);
//   - exec-us/cs: their execution time, as the server measured it;
//   - wal-rec/cs, wal-sync/cs: WAL records written and WAL flushes
//     (pg_stat_wal), the cost of the fencing sequence;
//   - client-cpu-us/cs: the test process's CPU time (user+system);
//   - server-cpu-us/cs: the server's, when DLOCK_BENCH_SERVER_CPU names a
//     file holding its CPU time in nanoseconds (a container's cgroup
//     cpuacct.usage).
//
// With -v it also logs the statements by execution time. Run it with a
// count, not a duration:
//
//	go test -run '^$' -bench Independent64 -benchtime 5000x -cpuprofile /tmp/cpu.out ./drivers/postgres/
func BenchmarkIndependent64(b *testing.B) {
	const contenders = 64
	for _, kind := range []string{"raw", "driver", "dlock"} {
		b.Run(kind, func(b *testing.B) {
			xs := independentLockers(b, kind, contenders)
			stats := benchConn(b)
			ctx := context.Background()
			resetServerStats(b, stats)
			before := takeCounters(b, stats)
			var remaining atomic.Int64
			remaining.Store(int64(b.N))
			counts := make([]int, len(xs))
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for i, x := range xs {
				wg.Go(func() {
					for remaining.Add(-1) >= 0 {
						if err := x.lock(ctx); err != nil {
							b.Error(err)
							return
						}
						counts[i]++
						if err := x.unlock(ctx); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			after := takeCounters(b, stats)
			n := float64(b.N)
			b.ReportMetric(n/elapsed.Seconds(), "cs/s")
			b.ReportMetric(jain(counts), "jain")
			b.ReportMetric(float64(after.stmts-before.stmts)/n, "stmts/cs")
			b.ReportMetric((after.execMs-before.execMs)*1000/n, "exec-us/cs")
			b.ReportMetric(float64(after.walRecords-before.walRecords)/n, "wal-rec/cs")
			b.ReportMetric(float64(after.walSyncs-before.walSyncs)/n, "wal-sync/cs")
			b.ReportMetric(float64(after.clientCPU-before.clientCPU)/float64(time.Microsecond)/n, "client-cpu-us/cs")
			if after.serverCPU > 0 {
				b.ReportMetric(float64(after.serverCPU-before.serverCPU)/float64(time.Microsecond)/n, "server-cpu-us/cs")
			}
			logStatements(b, stats, n)
		})
	}
}

// independentLockers returns n contenders on one key, each with a
// connection or a dlock Client (and Driver) of its own, warmed up.
func independentLockers(b *testing.B, kind string, n int) []locker {
	key := testkit.Key(b)
	out := make([]locker, n)
	for i := range out {
		switch kind {
		case "raw":
			out[i] = &rawLocker{c: benchConn(b), id: KeyID(key)}
		case "dlock":
			c := testkit.Client(b, newTestDriver(b), dlock.WithTTL(8*time.Second))
			out[i] = &dlockLocker{m: testkit.Mutex(b, c, key)}
		case "driver":
			out[i] = &driverLocker{d: newTestDriver(b), key: key}
		}
	}
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

// counters are the cumulative costs BenchmarkIndependent64 reports.
type counters struct {
	stmts                int64
	execMs               float64
	walRecords, walSyncs int64
	clientCPU, serverCPU time.Duration
}

func resetServerStats(b *testing.B, c *pgx.Conn) {
	ctx := context.Background()
	if _, err := c.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		b.Logf("pg_stat_statements: %v", err)
	}
	_, _ = c.Exec(ctx, "SELECT pg_stat_statements_reset()")
	_, _ = c.Exec(ctx, "SELECT pg_stat_reset_shared('wal')")
}

func takeCounters(b *testing.B, c *pgx.Conn) counters {
	ctx := context.Background()
	var k counters
	err := c.QueryRow(ctx, `SELECT coalesce(sum(calls), 0)::int8, coalesce(sum(total_exec_time), 0)::float8
FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat%'`).Scan(&k.stmts, &k.execMs)
	if err != nil {
		b.Logf("pg_stat_statements: %v", err)
	}
	// pg_stat_wal is flushed by each backend at its idle moments; asking
	// for a snapshot from this one is close enough over thousands of cs.
	if err := c.QueryRow(ctx, "SELECT wal_records, wal_sync FROM pg_stat_wal").Scan(&k.walRecords, &k.walSyncs); err != nil {
		b.Logf("pg_stat_wal: %v", err)
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		k.clientCPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if path := os.Getenv("DLOCK_BENCH_SERVER_CPU"); path != "" {
		if raw, err := os.ReadFile(path); err == nil {
			if ns, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64); err == nil {
				k.serverCPU = time.Duration(ns)
			}
		}
	}
	return k
}

// logStatements logs the statements of the run by total execution time.
func logStatements(b *testing.B, c *pgx.Conn, n float64) {
	rows, err := c.Query(context.Background(), `SELECT calls, total_exec_time, left(regexp_replace(query, '\s+', ' ', 'g'), 70)
FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat%' ORDER BY total_exec_time DESC LIMIT 8`)
	if err != nil {
		return
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var calls int64
		var ms float64
		var q string
		if rows.Scan(&calls, &ms, &q) == nil {
			lines = append(lines, fmt.Sprintf("%8.3f/cs %7.1f us/call %6.1f us/cs  %s", float64(calls)/n, ms*1000/max(float64(calls), 1), ms*1000/n, q))
		}
	}
	b.Logf("statements:\n%s", strings.Join(lines, "\n"))
}

// jain is Jain's fairness index of counts.
func jain(counts []int) float64 {
	var sum, squares float64
	for _, c := range counts {
		sum += float64(c)
		squares += float64(c) * float64(c)
	}
	if squares == 0 {
		return 0
	}
	return sum * sum / (float64(len(counts)) * squares)
}

// BenchmarkIndependentHandoff is BenchmarkHandoff with a Client (or a
// connection) per contender, as bench/peers measures it, and the driver
// alone beside them ("driver": Acquire and Release without the core), to
// tell the driver's part of a handoff from the core's.
func BenchmarkIndependentHandoff(b *testing.B) {
	for _, kind := range []string{"raw", "driver", "dlock"} {
		b.Run(kind, func(b *testing.B) { handoff(b, independentLockers(b, kind, 2)) })
	}
}

// driverLocker is a contender that uses the Driver directly.
type driverLocker struct {
	d   *Driver
	key string
	l   driver.Lease
}

func (x *driverLocker) lock(ctx context.Context) (err error) {
	x.l, err = x.d.Acquire(ctx, driver.Request{Key: x.key, ID: "bench", TTL: 8 * time.Second, Block: true})
	return err
}

func (x *driverLocker) unlock(ctx context.Context) error { return x.l.Release(ctx) }

// BenchmarkKitHandoff is bench/peers' handoff to one waiter
// (benchkit.MeasureHandoffLockers: the holder keeps the lock until the
// waiter has called Lock, and 200 µs more), for raw connections, the
// Driver alone and dlock Clients, each contender independent.
func BenchmarkKitHandoff(b *testing.B) {
	for _, kind := range []string{"raw", "driver", "dlock"} {
		b.Run(kind, func(b *testing.B) {
			xs := independentLockers(b, kind, 2)
			ls := make([]benchkit.Locker, len(xs))
			for i, x := range xs {
				ls[i] = benchkit.LockerFunc(func(ctx context.Context) (func(context.Context) error, error) {
					if err := x.lock(ctx); err != nil {
						return nil, err
					}
					return x.unlock, nil
				})
			}
			b.ResetTimer()
			h, err := benchkit.MeasureHandoffLockers(context.Background(), ls, benchkit.HandoffOptions{Clients: 2, Rounds: b.N})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(h.Latency.P50)/1e3, "p50-us")
			b.ReportMetric(float64(h.Latency.P99)/1e3, "p99-us")
		})
	}
}
