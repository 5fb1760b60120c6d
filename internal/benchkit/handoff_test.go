package benchkit_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/drivers/memory"
	"github.com/dlock-go/dlock/internal/benchkit"
)

// remoteLike wraps the memory driver without its server-side queue, with a
// token block and a Transferer as the Redis driver declares them, and makes
// each acquisition and transfer take rtt, as a round trip to a loopback
// server would; it counts them.
type remoteLike struct {
	driver.Driver
	rtt      time.Duration
	requests atomic.Uint64
}

func (d *remoteLike) Capabilities() driver.Capabilities {
	in := d.Driver.Capabilities()
	return driver.Capabilities{Notifier: in.Notifier, Transferer: d, TokenBlock: in.TokenBlock}
}

func (d *remoteLike) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	d.requests.Add(1)
	time.Sleep(d.rtt / 2)
	defer time.Sleep(d.rtt / 2)
	return d.Driver.Acquire(ctx, req)
}

func (d *remoteLike) Transfer(ctx context.Context, from driver.Lease, to driver.Request) (driver.Lease, error) {
	d.requests.Add(1)
	time.Sleep(d.rtt / 2)
	defer time.Sleep(d.rtt / 2)
	return d.Driver.Capabilities().Transferer.Transfer(ctx, from, to)
}

// BenchmarkHandoffRemoteLike: handoff inside one Client, 1 and 16 waiters,
// over a backend with a round trip. Run with -benchtime=1x.
func BenchmarkHandoffRemoteLike(b *testing.B) {
	for _, rtt := range []time.Duration{0, 150 * time.Microsecond} {
		for _, waiters := range []int{1, 16} {
			b.Run(fmt.Sprintf("rtt=%v/waiters=%d", rtt, waiters), func(b *testing.B) {
				backend := memory.NewBackend()
				d := &remoteLike{Driver: memory.New(backend, memory.WithoutBlocking(), memory.WithTokenBlocks(16)), rtt: rtt}
				target := benchkit.Target{
					Name:      "remote-like",
					NewClient: func(_ context.Context, opts ...dlock.Option) (*dlock.Client, error) { return dlock.New(d, opts...) },
					Requests:  d.requests.Load,
				}
				for b.Loop() {
					h, err := benchkit.MeasureHandoff(b.Context(), target, waiters, 1, 400)
					if err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(float64(h.Latency.P50.Nanoseconds()), "p50-ns")
					b.ReportMetric(float64(h.Latency.P99.Nanoseconds()), "p99-ns")
					b.ReportMetric(h.Requests, "req/handoff")
				}
			})
		}
	}
}
