package benchkit_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/drivers/memory"
	"github.com/dlock-go/dlock/internal/benchkit"
)

// redlockLike wraps the memory driver as the RedLock driver looks to the
// core: token blocks and notifications, no Transferer and no server-side
// queue the core could block in; each acquisition takes rtt (a round of
// requests to several masters), and each release is notified dups times,
// spread over spread (one notification per master, arriving late).
type redlockLike struct {
	driver.Driver
	rtt, spread time.Duration
	dups        int
	acquires    atomic.Uint64
}

func (d *redlockLike) Capabilities() driver.Capabilities {
	return driver.Capabilities{Notifier: d, TokenBlock: d.Driver.Capabilities().TokenBlock}
}

func (d *redlockLike) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	d.acquires.Add(1)
	time.Sleep(d.rtt / 2) // latency of the simulated masters, not synchronisation
	defer time.Sleep(d.rtt / 2)
	return d.Driver.Acquire(ctx, req)
}

func (d *redlockLike) Subscribe(ctx context.Context, key string) (driver.Subscription, error) {
	in, err := d.Driver.Capabilities().Notifier.Subscribe(ctx, key)
	if err != nil {
		return nil, err
	}
	s := &dupSub{in: in, c: make(chan struct{}, 1), stop: make(chan struct{})}
	s.wg.Go(func() { s.run(d.dups, d.spread) })
	return s, nil
}

// dupSub forwards each notification of in several times.
type dupSub struct {
	in   driver.Subscription
	c    chan struct{}
	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup
}

func (s *dupSub) run(dups int, spread time.Duration) {
	for {
		select {
		case <-s.stop:
			return
		case <-s.in.C():
		}
		for i := range dups {
			if i > 0 {
				time.Sleep(spread / time.Duration(dups)) // the masters' notifications arrive one after another
			}
			select {
			case s.c <- struct{}{}:
			default:
			}
		}
	}
}

func (s *dupSub) C() <-chan struct{} { return s.c }

func (s *dupSub) Close() error {
	s.once.Do(func() { close(s.stop) })
	s.wg.Wait()
	return s.in.Close()
}

// BenchmarkHandoffRedLockLike: handoff inside one Client, 1 and 16 waiters,
// over a RedLock-like backend (see redlockLike). The figure to read is
// acquisitions/handoff, counted: a handoff inside the Client costs none,
// and every (maxTransfers+1)th goes through the backend to yield to other
// Clients, so the floor is 1/9. Run with -benchtime=1x.
func BenchmarkHandoffRedLockLike(b *testing.B) {
	for _, dups := range []int{1, 5} {
		for _, waiters := range []int{1, 16} {
			b.Run(fmt.Sprintf("notifications=%d/waiters=%d", dups, waiters), func(b *testing.B) {
				benchmarkHandoffRedLockLike(b, dups, waiters)
			})
		}
	}
}

func benchmarkHandoffRedLockLike(b *testing.B, dups, waiters int) {
	d := &redlockLike{
		Driver: memory.New(memory.NewBackend(), memory.WithoutBlocking(), memory.WithTokenBlocks(16)),
		rtt:    2 * time.Millisecond, spread: time.Millisecond, dups: dups,
	}
	target := benchkit.Target{
		Name:      "redlock-like",
		NewClient: func(_ context.Context, opts ...dlock.Option) (*dlock.Client, error) { return dlock.New(d, opts...) },
		Requests:  d.acquires.Load,
	}
	for b.Loop() {
		h, err := benchkit.MeasureHandoff(b.Context(), target, waiters, 1, 300)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(h.Latency.P50.Nanoseconds()), "p50-ns")
		b.ReportMetric(h.Requests, "acquires/handoff")
	}
}
