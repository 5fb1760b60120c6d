package redis

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
)

// BenchmarkUncontendedCost counts what one uncontended Lock and Unlock
// costs, in figures a loaded machine skews less than timings: allocations
// per op (-benchmem), this process's CPU per op (cpu-ns/op, getrusage:
// core, driver and go-redis together) and the server's time in the
// commands sent per op (srv-ns/op, INFO commandstats usec; load inflates
// it too). "raw" is the peers' design on the same server: SET NX PX, then
// a compare-and-delete script (redislock's release), through a go-redis
// client made the same way. ns/op is timed and only meaningful on a quiet
// machine; compare dlock with raw within one run.
//
//	go test -run '^$' -bench UncontendedCost -benchmem -benchtime 5000x ./drivers/redis/
func BenchmarkUncontendedCost(b *testing.B) {
	b.Run("dlock", func(b *testing.B) {
		rdb := newRDB(b)
		c := testkit.Client(b, newTestDriver(b, rdb), dlock.WithTTL(15*time.Second))
		m := testkit.Mutex(b, c, testkit.Key(b))
		ctx := context.Background()
		// Loads the scripts and opens the connection before the count.
		l := testkit.Lock(b, ctx, m)
		if err := l.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
		costLoop(b, rdb, []string{"evalsha"}, func() {
			l, err := m.Lock(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("raw", func(b *testing.B) {
		rdb := newRDB(b)
		key := testkit.Key(b) + "/raw"
		del := goredis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
		ctx := context.Background()
		op := func() {
			id := testkit.NewID() // a token per lock, as redislock makes
			ok, err := rdb.SetNX(ctx, key, id, 15*time.Second).Result()
			if err != nil || !ok {
				b.Fatal(ok, err)
			}
			if err := del.Run(ctx, rdb, []string{key}, id).Err(); err != nil {
				b.Fatal(err)
			}
		}
		op()
		costLoop(b, rdb, []string{"set", "evalsha"}, op)
	})
}

// costLoop runs op b.N times and reports this process's CPU and the
// server's per op, the latter from the commands sent (see serverUsec).
func costLoop(b *testing.B, rdb *goredis.Client, sent []string, op func()) {
	b.Helper()
	if err := rdb.ConfigResetStat(context.Background()).Err(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	for b.Loop() {
		op()
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(serverUsec(b, rdb, sent))*1000/float64(b.N), "srv-ns/op")
}

// serverUsec is the server's time in the commands named sent since its
// statistics were reset: the commands the client sends, whose time includes
// that of the commands a script runs (which count again under their own
// names, so they are left out).
func serverUsec(b *testing.B, rdb *goredis.Client, sent []string) int64 {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total int64
	for line := range strings.SplitSeq(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_")
		if !ok {
			continue
		}
		name, fields, _ := strings.Cut(rest, ":")
		if !slices.Contains(sent, name) {
			continue
		}
		for f := range strings.SplitSeq(fields, ",") {
			if v, ok := strings.CutPrefix(f, "usec="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				total += n
			}
		}
	}
	return total
}
