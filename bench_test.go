package dlock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/drivers/memory"
	"github.com/dlock-go/dlock/internal/benchkit"
)

// BenchmarkHandoff measures the core's in-process handoff (handoff.go) over
// the in-process backend without its server-side queue, both ways: by the
// backend's Transfer, and by the next token of the grant's block. The
// memory driver's own suite (drivers/memory) waits in the backend's queue
// and never takes this path. Run with -benchtime=1x.
func BenchmarkHandoff(b *testing.B) {
	for _, name := range []string{"Transfer", "TokenBlock"} {
		driverOpts := []memory.Option{memory.WithoutBlocking()}
		if name == "TokenBlock" {
			driverOpts = append(driverOpts, memory.WithTokenBlocks(64))
		}
		backend := memory.NewBackend()
		target := benchkit.Target{
			Name: "memory/" + name,
			NewClient: func(_ context.Context, opts ...dlock.Option) (*dlock.Client, error) {
				return dlock.New(memory.New(backend, driverOpts...), opts...)
			},
		}
		for _, waiters := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/waiters=%d", name, waiters), func(b *testing.B) {
				for b.Loop() {
					h, err := benchkit.MeasureHandoff(b.Context(), target, waiters, 1, 400)
					if err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(float64(h.Latency.P50.Nanoseconds()), "p50-ns")
					b.ReportMetric(float64(h.Latency.P99.Nanoseconds()), "p99-ns")
				}
			})
		}
		b.Run(name+"/contended=8", func(b *testing.B) {
			for b.Loop() {
				c, err := benchkit.MeasureContended(b.Context(), target, 8, 1, time.Second)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(c.PerSecond, "cs/s")
				b.ReportMetric(float64(c.Wait.Max.Nanoseconds()), "max-wait-ns")
			}
		})
	}
}
