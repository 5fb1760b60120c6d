package zookeeper

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// The benchmarks compare, in one run, dlock over this driver with the
// client library's own zk.Lock and with the raw round trips a lock needs
// (create and delete of an ephemeral sequential node, each a synced write).
// Compare ratios within a run, not times across runs.
//
//	go test -run XXX -bench . -benchtime 2000x ./drivers/zookeeper/

// locker is one contender: lock, then unlock.
type locker func(ctx context.Context) (unlock func() error, err error)

func dlockLocker(b *testing.B, base, key string) locker {
	c := newClient(b, dialAddr(b, serverAddr(b), base))
	m := mutex(b, c, key)
	return func(ctx context.Context) (func() error, error) {
		l, err := m.Lock(ctx)
		if err != nil {
			return nil, err
		}
		return func() error { return l.Unlock(ctx) }, nil
	}
}

func zkLocker(b *testing.B, conn *zk.Conn, base, key string) locker {
	lock := zk.NewLock(conn, "/dlock-test"+base+"/zklock/"+escapeKey(key), zk.WorldACL(zk.PermAll))
	return func(context.Context) (func() error, error) {
		if err := lock.Lock(); err != nil {
			return nil, err
		}
		return lock.Unlock, nil
	}
}

func BenchmarkUncontended(b *testing.B) {
	base := testBase()
	conn := rawConn(b)
	dir := "/dlock-test" + base + "/raw"
	b.Run("raw-create-delete", func(b *testing.B) {
		for _, p := range []string{"/dlock-test", "/dlock-test" + base, dir} {
			if _, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && err != zk.ErrNodeExists {
				b.Fatal(err)
			}
		}
		for b.Loop() {
			p, err := conn.Create(dir+"/n-", nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
			if err != nil {
				b.Fatal(err)
			}
			if err := conn.Delete(p, -1); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("zk.Lock", func(b *testing.B) { uncontended(b, zkLocker(b, rawConn(b), base, "zk")) })
	b.Run("dlock", func(b *testing.B) { uncontended(b, dlockLocker(b, base, "dlock")) })
}

func uncontended(b *testing.B, lock locker) {
	ctx := context.Background()
	for b.Loop() {
		unlock, err := lock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := unlock(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHandoff measures the time from a holder's unlock call to the next
// waiter's lock returning, with 1 and 16 waiters: each contender takes the
// lock, and releases it at once.
func BenchmarkHandoff(b *testing.B) {
	base := testBase()
	for _, waiters := range []int{1, 16} {
		b.Run(byWaiters("zk.Lock", waiters), func(b *testing.B) {
			lockers := make([]locker, waiters+1)
			for i := range lockers {
				lockers[i] = zkLocker(b, rawConn(b), base, byWaiters("zk", waiters))
			}
			handoff(b, lockers)
		})
		b.Run(byWaiters("dlock", waiters), func(b *testing.B) {
			lockers := make([]locker, waiters+1)
			for i := range lockers {
				lockers[i] = dlockLocker(b, base, byWaiters("dlock", waiters))
			}
			handoff(b, lockers)
		})
	}
}

func byWaiters(name string, n int) string {
	return name + "/waiters-" + string(rune('0'+n/10)) + string(rune('0'+n%10))
}

func handoff(b *testing.B, lockers []locker) {
	ctx := context.Background()
	var mu sync.Mutex
	var released time.Time // when the last holder started to unlock
	var handoffs []time.Duration
	left := b.N
	var wg sync.WaitGroup
	b.ResetTimer()
	for _, lock := range lockers {
		wg.Go(func() {
			for {
				unlock, err := lock(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				now := time.Now()
				mu.Lock()
				done := left <= 0
				if !released.IsZero() && !done {
					handoffs = append(handoffs, now.Sub(released))
				}
				left--
				released = time.Now()
				mu.Unlock()
				if err := unlock(); err != nil {
					b.Error(err)
					return
				}
				if done {
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	reportPercentiles(b, handoffs)
}

func reportPercentiles(b *testing.B, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	at := func(q float64) float64 { return float64(ds[int(q*float64(len(ds)-1))].Microseconds()) / 1000 }
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}

// BenchmarkContended64 measures locks per second with 64 goroutines (16
// clients of 4 goroutines each) contending for one key.
func BenchmarkContended64(b *testing.B) {
	base := testBase()
	const clients, perClient = 16, 4
	b.Run("zk.Lock", func(b *testing.B) {
		var lockers []locker
		for range clients {
			conn := rawConn(b)
			for range perClient {
				lockers = append(lockers, zkLocker(b, conn, base, "zk-64"))
			}
		}
		contended(b, lockers)
	})
	b.Run("dlock", func(b *testing.B) {
		var lockers []locker
		for range clients {
			c := newClient(b, dialAddr(b, serverAddr(b), base))
			m := mutex(b, c, "dlock-64")
			for range perClient {
				lockers = append(lockers, func(ctx context.Context) (func() error, error) {
					l, err := m.Lock(ctx)
					if err != nil {
						return nil, err
					}
					return func() error { return l.Unlock(ctx) }, nil
				})
			}
		}
		contended(b, lockers)
	})
}

func contended(b *testing.B, lockers []locker) {
	ctx := context.Background()
	var mu sync.Mutex
	left := b.N
	var wg sync.WaitGroup
	start := time.Now()
	b.ResetTimer()
	for _, lock := range lockers {
		wg.Go(func() {
			for {
				mu.Lock()
				if left <= 0 {
					mu.Unlock()
					return
				}
				left--
				mu.Unlock()
				unlock, err := lock(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				if err := unlock(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "locks/s")
}
