package redis

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/benchkit"
	"github.com/dlock-go/dlock/internal/benchtargets"
	"github.com/dlock-go/dlock/internal/testkit"
)

// BenchmarkSuite runs the standard benchmark suite (internal/benchkit)
// against the test server, comparing with raw SET NX PX + DEL in the same
// run. Targets: uncontended within 1.2x raw; handoff p50 within 0.25 ms; at
// most 4 requests per critical section with 16 waiters in one process.
//
//	make bench   (or: go test -run '^$' -bench Suite -benchtime 1x ./drivers/redis/)
func BenchmarkSuite(b *testing.B) {
	server.Need(b)
	benchkit.RunOn(b, func() (benchkit.Target, func(), error) { return benchtargets.Redis(server.URL) })
}

// BenchmarkModes measures uncontended acquire+release of a plain lock, a
// reentrant lock (WithOwner) and a read lock, each interleaved with raw
// SET NX PX + DEL round trips in the same run, and reports each p50 and its
// ratio to raw.
//
//	go test -run '^$' -bench Modes -benchtime 1x ./drivers/redis/
func BenchmarkModes(b *testing.B) {
	server.Need(b)
	target, closeRaw, err := benchtargets.Redis(server.URL)
	if err != nil {
		b.Fatal(err)
	}
	defer closeRaw()
	for _, m := range []struct {
		name string
		opts []dlock.Option
		read bool
	}{
		{"exclusive", nil, false},
		{"reentrant", []dlock.Option{dlock.WithOwner("bench-owner")}, false},
		{"read", nil, true},
	} {
		b.Run(m.name, func(b *testing.B) {
			for b.Loop() {
				u, err := measureMode(b.Context(), target, m.opts, m.read, 2000)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(u.Lock.P50.Nanoseconds()), "p50-ns")
				b.ReportMetric(float64(u.Lock.P99.Nanoseconds()), "p99-ns")
				b.ReportMetric(float64(u.Raw.P50.Nanoseconds()), "raw-p50-ns")
				b.ReportMetric(u.Ratio, "x-raw")
			}
		})
	}
}

// measureMode is benchkit.MeasureUncontended for a Mutex made with opts, or
// for an RWMutex's read lock.
func measureMode(ctx context.Context, t benchkit.Target, opts []dlock.Option, read bool, n int) (benchkit.Uncontended, error) {
	c, err := t.NewClient(ctx)
	if err != nil {
		return benchkit.Uncontended{}, err
	}
	defer c.Close(context.WithoutCancel(ctx))
	key := "bench/modes/" + testkit.NewID()
	m, err := c.RWMutex(key, opts...)
	if err != nil {
		return benchkit.Uncontended{}, err
	}
	lock := m.Lock
	if read {
		lock = m.RLock
	}
	var lockTimes, rawTimes []time.Duration
	for range n {
		start := time.Now()
		l, err := lock(ctx)
		if err != nil {
			return benchkit.Uncontended{}, err
		}
		if err := l.Unlock(ctx); err != nil {
			return benchkit.Uncontended{}, err
		}
		lockTimes = append(lockTimes, time.Since(start))
		start = time.Now()
		if err := t.Raw(ctx, key+"/raw"); err != nil {
			return benchkit.Uncontended{}, err
		}
		rawTimes = append(rawTimes, time.Since(start))
	}
	u := benchkit.Uncontended{Lock: p50p99(lockTimes), Raw: p50p99(rawTimes)}
	u.Ratio = float64(u.Lock.P50) / float64(u.Raw.P50)
	return u, nil
}

// p50p99 summarises durations (sorting them).
func p50p99(ds []time.Duration) benchkit.Latency {
	slices.Sort(ds)
	at := func(q float64) time.Duration { return ds[min(len(ds)-1, int(q*float64(len(ds))))] }
	return benchkit.Latency{N: len(ds), P50: at(0.5), P99: at(0.99), Max: ds[len(ds)-1]}
}

// BenchmarkRedLock compares RedLock over five masters with a single node
// (the first master) in the same run: uncontended acquire+release p50 of
// each and their ratio (x-single), and RedLock's requests per
// acquire+release summed over the masters; then the standard suite over
// RedLock. On one machine the masters share its cores, so the fan-out to
// five is CPU-bound here, where on separate hosts it costs about one
// round trip to the slowest master of the majority.
//
//	go test -run '^$' -bench RedLock -benchtime 1x ./drivers/redis/
func BenchmarkRedLock(b *testing.B) {
	group := ownGroup(b, 5)
	// A per-master timeout of 1 s rather than the default 100 ms: on a
	// loaded 2-core machine, renewing 10,000 held locks keeps the masters
	// busy long enough for the default to refuse acquisitions spuriously.
	rl, closeRL, err := benchtargets.RedLock(group.RedLockURL()+"?node_timeout=1s", group.Addrs())
	if err != nil {
		b.Fatal(err)
	}
	defer closeRL()
	single, closeSingle, err := benchtargets.Redis("redis://" + group.Addrs()[0] + "/0")
	if err != nil {
		b.Fatal(err)
	}
	defer closeSingle()
	b.Run("Uncontended", func(b *testing.B) {
		for b.Loop() {
			one, err := benchkit.MeasureUncontended(b.Context(), single, 1000)
			if err != nil {
				b.Fatal(err)
			}
			five, err := benchkit.MeasureUncontended(b.Context(), rl, 1000)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(one.Lock.P50.Nanoseconds()), "single-p50-ns")
			b.ReportMetric(float64(five.Lock.P50.Nanoseconds()), "redlock-p50-ns")
			b.ReportMetric(float64(five.Lock.P99.Nanoseconds()), "redlock-p99-ns")
			b.ReportMetric(float64(five.Lock.P50)/float64(one.Lock.P50), "x-single")
			b.ReportMetric(five.Ratio, "x-raw")
			b.ReportMetric(five.Requests, "requests/op")
		}
	})
	b.Run("Suite", func(b *testing.B) { benchkit.Run(b, rl) })
}

// BenchmarkCluster runs the standard suite over a 3-master Redis Cluster,
// comparing with raw SET NX PX + DEL through a ClusterClient.
//
//	go test -run '^$' -bench Cluster -benchtime 1x ./drivers/redis/
func BenchmarkCluster(b *testing.B) {
	cluster := ownCluster(b, 3)
	benchkit.RunOn(b, func() (benchkit.Target, func(), error) {
		return benchtargets.RedisCluster(cluster.URL(), cluster.Addrs())
	})
}
