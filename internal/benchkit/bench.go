package benchkit

import (
	"fmt"
	"testing"
	"time"
)

// Sizes of the standard suite: small enough for a 2-core machine to run every
// backend in minutes, large enough for stable medians.
const (
	uncontendedRounds = 2000
	handoffRounds     = 400
	contendedFor      = 3 * time.Second
	heldLocks         = 10000
	heldTTL           = 3 * time.Second
	heldPeriods       = 3
)

// RunOn runs the standard suite ([Run]) on the target that open makes,
// then calls the func open returns with it (which closes the target's raw
// client); an error of open fails b.
func RunOn(b *testing.B, open func() (Target, func(), error)) {
	b.Helper()
	t, done, err := open()
	if err != nil {
		b.Fatal(err)
	}
	defer done()
	Run(b, t)
}

// Run runs the standard suite as sub-benchmarks of b, reporting each figure
// with b.ReportMetric. Each sub-benchmark measures once per iteration; run it
// with -benchtime=1x.
func Run(b *testing.B, t Target) {
	b.Run("Uncontended", func(b *testing.B) {
		for b.Loop() {
			u, err := MeasureUncontended(b.Context(), t, uncontendedRounds)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(u.Lock.P50.Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(u.Lock.P99.Nanoseconds()), "p99-ns")
			if t.Raw != nil {
				b.ReportMetric(float64(u.Raw.P50.Nanoseconds()), "raw-p50-ns")
				b.ReportMetric(u.Ratio, "x-raw")
			}
			if t.Requests != nil {
				b.ReportMetric(u.Requests, "requests/op")
			}
		}
	})
	for _, c := range []struct{ waiters, clients int }{{1, 1}, {16, 1}, {16, 16}} {
		b.Run(fmt.Sprintf("Handoff/waiters=%d/clients=%d", c.waiters, c.clients), func(b *testing.B) {
			for b.Loop() {
				h, err := MeasureHandoff(b.Context(), t, c.waiters, c.clients, handoffRounds)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(h.Latency.P50.Nanoseconds()), "p50-ns")
				b.ReportMetric(float64(h.Latency.P99.Nanoseconds()), "p99-ns")
				if t.Requests != nil {
					b.ReportMetric(h.Requests, "requests/cs")
				}
			}
		})
	}
	for _, g := range []int{8, 64} {
		b.Run(fmt.Sprintf("Contended/goroutines=%d", g), func(b *testing.B) {
			for b.Loop() {
				c, err := MeasureContended(b.Context(), t, g, min(g, 8), contendedFor)
				if err != nil {
					b.Fatal(err)
				}
				reportContended(b, c)
			}
		})
	}
	if t.Poller != nil {
		b.Run("Contended/goroutines=64/raw-poller", func(b *testing.B) {
			for b.Loop() {
				c, err := MeasurePolledContended(b.Context(), t.Poller, 64, contendedFor)
				if err != nil {
					b.Fatal(err)
				}
				reportContended(b, c)
			}
		})
	}
	b.Run(fmt.Sprintf("Semaphore/permits=%d", semaphorePermits), func(b *testing.B) {
		for b.Loop() {
			s, err := MeasureSemaphore(b.Context(), t, uncontendedRounds, contendedFor)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(s.Uncontended.P50.Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(s.Lock.P50.Nanoseconds()), "lock-p50-ns")
			if t.Requests != nil {
				b.ReportMetric(s.Requests, "requests/op")
			}
			reportContended(b, s.Contended)
		}
	})
	b.Run("Failover", func(b *testing.B) {
		for b.Loop() {
			f, err := MeasureFailover(b.Context(), t, failoverRounds, failoverTTL)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(f.P50.Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(f.P95.Nanoseconds()), "p95-ns")
			b.ReportMetric(float64(f.TTL.Nanoseconds()), "ttl-ns")
		}
	})
	b.Run(fmt.Sprintf("Held/locks=%d", heldLocks), func(b *testing.B) {
		for b.Loop() {
			h, err := MeasureManyHeld(b.Context(), t, heldLocks, heldTTL, heldPeriods)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(h.RenewalTripsPeriod, "batches/period")
			b.ReportMetric(h.CPUFraction*100, "cpu-%")
			b.ReportMetric(h.HeapPerLock, "heap-B/lock")
			b.ReportMetric(h.GoroutinesPerLock, "goroutines/lock")
		}
	})
}

// reportContended reports one contended run's figures.
func reportContended(b *testing.B, c Contended) {
	b.ReportMetric(c.PerSecond, "cs/s")
	b.ReportMetric(c.Jain, "jain")
	b.ReportMetric(float64(c.Wait.Max.Nanoseconds()), "max-wait-ns")
	b.ReportMetric(c.MaxOverP50, "max/p50")
}
