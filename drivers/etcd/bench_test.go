package etcd

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/benchkit"
	"github.com/dlock-go/dlock/internal/benchtargets"
	"github.com/dlock-go/dlock/internal/testkit"
)

// Benchmarks against the real server, figures not assertions. Targets: at
// least twice the contended throughput of etcd's own concurrency.Mutex, and
// a handoff p50 within 1 ms; uncontended near a raw put + delete.
//
//	go test -run '^$' -bench . -benchtime 1x ./drivers/etcd/

// BenchmarkSuite runs the standard benchmark suite (internal/benchkit)
// against the test server, comparing with a raw put + delete in the same run
// and counting requests on the server.
func BenchmarkSuite(b *testing.B) {
	benchkit.Run(b, benchTarget(b))
}

// benchTarget describes the test server to the benchmark kit.
func benchTarget(b *testing.B) benchkit.Target {
	b.Helper()
	server.Need(b)
	cli := newCli(b)
	t := benchkit.Target{
		Name: "etcd",
		NewClient: func(ctx context.Context, opts ...dlock.Option) (*dlock.Client, error) {
			return dlock.Open(ctx, server.URL, opts...)
		},
		Raw: func(ctx context.Context, key string) error { return rawPutDelete(ctx, cli, key) },
		// etcd lease TTLs are whole seconds.
		MinTTL: time.Second,
	}
	if metrics := metricsURL(b); metrics != "" {
		t.Requests = func() uint64 { return benchtargets.EtcdRequests(metrics) }
	}
	return t
}

// rawPutDelete is what one lock costs at the least on etcd: a write that
// creates a key, and one that deletes it.
func rawPutDelete(ctx context.Context, cli *clientv3.Client, key string) error {
	if _, err := cli.Put(ctx, key, ""); err != nil {
		return err
	}
	_, err := cli.Delete(ctx, key)
	return err
}

// metricsURL returns the Prometheus endpoint of the test server's first
// member ("" when the server is external: its counts are not the test's).
func metricsURL(tb testing.TB) string {
	if !server.Faults() {
		return ""
	}
	return "http://" + endpoints(tb)[0] + "/metrics"
}

// contender is one party to a lock, for the comparison benchmarks.
type contender interface {
	lock(ctx context.Context) (unlock func(context.Context) error, err error)
}

// impl makes contenders of one lock implementation: contender i of n
// shares its client with every n-th other.
type impl struct {
	name string
	// make returns contenders on key, spread over clients clients, and a
	// function that closes them.
	make func(b *testing.B, key string, contenders, clients int) ([]contender, func())
}

// dlockImpl is this driver, through dlock.Open and the core: one session
// per client, a queue key per Lock call.
var dlockImpl = impl{name: "dlock", make: func(b *testing.B, key string, n, clients int) ([]contender, func()) {
	var cs []*dlock.Client
	for range clients {
		c, err := dlock.Open(context.Background(), server.URL)
		if err != nil {
			b.Fatal(err)
		}
		cs = append(cs, c)
	}
	out := make([]contender, n)
	for i := range out {
		m, err := cs[i%clients].Mutex(key)
		if err != nil {
			b.Fatal(err)
		}
		out[i] = dlockContender{m}
	}
	return out, func() {
		for _, c := range cs {
			_ = c.Close(context.Background())
		}
	}
}}

type dlockContender struct{ m dlock.Mutex }

func (c dlockContender) lock(ctx context.Context) (func(context.Context) error, error) {
	l, err := c.m.Lock(ctx)
	if err != nil {
		return nil, err
	}
	return l.Unlock, nil
}

// mutexImpl is etcd's concurrency.Mutex, used as its documentation says:
// a session per contender (a session's Mutex on one prefix is one lock
// holder), over clients shared like dlock's.
var mutexImpl = impl{name: "mutex", make: func(b *testing.B, key string, n, clients int) ([]contender, func()) {
	var clis []*clientv3.Client
	var sessions []*concurrency.Session
	closeAll := func() {
		for _, s := range sessions {
			_ = s.Close()
		}
		for _, c := range clis {
			_ = c.Close()
		}
	}
	for range clients {
		cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints(b), Logger: zap.NewNop()})
		if err != nil {
			b.Fatal(err)
		}
		clis = append(clis, cli)
	}
	out := make([]contender, n)
	for i := range out {
		s, err := concurrency.NewSession(clis[i%clients], concurrency.WithTTL(15))
		if err != nil {
			closeAll()
			b.Fatal(err)
		}
		sessions = append(sessions, s)
		out[i] = mutexContender{concurrency.NewMutex(s, "bench-mutex/"+key)}
	}
	return out, closeAll
}}

type mutexContender struct{ m *concurrency.Mutex }

func (c mutexContender) lock(ctx context.Context) (func(context.Context) error, error) {
	if err := c.m.Lock(ctx); err != nil {
		return nil, err
	}
	return c.m.Unlock, nil
}

// BenchmarkVersusMutex measures this driver (through dlock) and etcd's
// concurrency.Mutex in the same run, on the same server, with the same
// harness: uncontended acquire+release (and a raw put + delete), handoff to
// 1 and 16 blocked waiters (each a client of its own), and throughput with
// 64 goroutines on 8 clients.
func BenchmarkVersusMutex(b *testing.B) {
	server.Need(b)
	cli := newCli(b)
	ctx := context.Background()
	metrics := metricsURL(b)

	b.Run("Uncontended", func(b *testing.B) {
		for b.Loop() {
			key := testkit.Key(b)
			dl, closeD := dlockImpl.make(b, key, 1, 1)
			mu, closeM := mutexImpl.make(b, key, 1, 1)
			once(b, ctx, dl[0]) // the session grant
			// The three interleaved, so that they see the same load.
			var times [3][]time.Duration
			for range 1000 {
				for i, op := range []func(){
					func() { once(b, ctx, dl[0]) },
					func() { once(b, ctx, mu[0]) },
					func() {
						if err := rawPutDelete(ctx, cli, key+"/raw"); err != nil {
							b.Fatal(err)
						}
					},
				} {
					t0 := time.Now()
					op()
					times[i] = append(times[i], time.Since(t0))
				}
			}
			// Requests, apart: scraping the server's metrics loads it.
			r0 := benchtargets.EtcdRequests(metrics)
			for range 100 {
				once(b, ctx, dl[0])
			}
			requests := benchtargets.EtcdRequests(metrics) - r0
			closeD()
			closeM()
			d, m, r := p(times[0], 50), p(times[1], 50), p(times[2], 50)
			b.ReportMetric(float64(d.Nanoseconds()), "dlock-p50-ns")
			b.ReportMetric(float64(m.Nanoseconds()), "mutex-p50-ns")
			b.ReportMetric(float64(r.Nanoseconds()), "raw-p50-ns")
			b.ReportMetric(float64(d)/float64(r), "dlock/raw")
			b.ReportMetric(float64(m)/float64(r), "mutex/raw")
			if metrics != "" {
				b.ReportMetric(float64(requests)/100, "dlock-requests/op")
			}
		}
	})
	for _, waiters := range []int{1, 16} {
		b.Run(fmt.Sprintf("Handoff/waiters=%d", waiters), func(b *testing.B) {
			for b.Loop() {
				for _, im := range []impl{dlockImpl, mutexImpl} {
					lat, reqs := handoff(b, im, waiters, 200, metrics)
					b.ReportMetric(float64(p(lat, 50).Nanoseconds()), im.name+"-p50-ns")
					b.ReportMetric(float64(p(lat, 99).Nanoseconds()), im.name+"-p99-ns")
					if metrics != "" {
						b.ReportMetric(reqs, im.name+"-requests/cs")
					}
				}
			}
		})
	}
	b.Run("Contended/goroutines=64", func(b *testing.B) {
		for b.Loop() {
			// Alternating rounds, so that both see the same drift in the
			// machine's load; the medians are reported.
			var rates [2][]float64
			for range 3 {
				for i, im := range []impl{dlockImpl, mutexImpl} {
					rates[i] = append(rates[i], contended(b, im, 64, 8, 2*time.Second))
				}
			}
			d, m := median(rates[0]), median(rates[1])
			b.ReportMetric(d, "dlock-cs/s")
			b.ReportMetric(m, "mutex-cs/s")
			b.ReportMetric(d/m, "dlock/mutex")
		}
	})
}

// median returns the median of xs (sorting xs).
func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// once locks and unlocks c.
func once(b *testing.B, ctx context.Context, c contender) {
	unlock, err := c.lock(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if err := unlock(ctx); err != nil {
		b.Fatal(err)
	}
}

// handoff has waiters+1 contenders, each on a client of its own, pass one
// lock around rounds times, holding it 200 µs each, and returns the time
// from each holder's Unlock call to the next Lock's return, and the server
// requests per critical section.
func handoff(b *testing.B, im impl, waiters, rounds int, metrics string) ([]time.Duration, float64) {
	ctx := context.Background()
	cs, closeAll := im.make(b, testkit.Key(b), waiters+1, waiters+1)
	defer closeAll()
	var (
		released  atomic.Int64
		remaining atomic.Int64
		mu        sync.Mutex
		lat       []time.Duration
		wg        sync.WaitGroup
	)
	remaining.Store(int64(rounds))
	start := time.Now()
	r0 := benchtargets.EtcdRequests(metrics)
	for _, c := range cs {
		wg.Go(func() {
			for remaining.Add(-1) >= 0 {
				unlock, err := c.lock(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				if r := released.Load(); r > 0 {
					mu.Lock()
					lat = append(lat, time.Since(start)-time.Duration(r))
					mu.Unlock()
				}
				for end := time.Now().Add(200 * time.Microsecond); time.Now().Before(end); {
				}
				released.Store(int64(time.Since(start)))
				if err := unlock(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return lat, float64(benchtargets.EtcdRequests(metrics)-r0) / float64(rounds)
}

// contended runs goroutines contenders on clients clients, locking and
// unlocking one key as fast as they can for d, and returns the critical
// sections per second.
func contended(b *testing.B, im impl, goroutines, clients int, d time.Duration) float64 {
	cs, closeAll := im.make(b, testkit.Key(b), goroutines, clients)
	defer closeAll()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var n atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for _, c := range cs {
		wg.Go(func() {
			for ctx.Err() == nil {
				unlock, err := c.lock(ctx)
				if err != nil {
					if ctx.Err() == nil {
						b.Error(err)
					}
					return
				}
				n.Add(1)
				_ = unlock(context.Background())
			}
		})
	}
	wg.Wait()
	return float64(n.Load()) / time.Since(start).Seconds()
}

// p returns the q-th percentile of ds (sorting ds).
func p(ds []time.Duration, q int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(len(ds)-1, len(ds)*q/100)]
}
