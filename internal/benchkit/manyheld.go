package benchkit

import (
	"context"
	"fmt"
	"runtime"
	"syscall"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/dlock-go/dlock"
)

// ManyHeld is the cost of holding many locks on one client.
type ManyHeld struct {
	Locks int    `json:"locks"`
	TTL   string `json:"ttl"`
	// RenewalTripsPeriod is renewal batches per period: one driver call
	// each, sent in one round trip per the driver's batch size (1,000
	// leases on Redis and ZooKeeper, 120 on etcd).
	RenewalTripsPeriod  float64 `json:"renewal_round_trips_per_period"`
	RenewalsPerPeriod   float64 `json:"renewals_per_period"`
	CPUFraction         float64 `json:"cpu_fraction"` // of one core, while holding
	HeapPerLock         float64 `json:"heap_bytes_per_lock"`
	GoroutinesPerLock   float64 `json:"goroutines_per_lock"`
	GoroutinesWhileHeld int     `json:"goroutines_while_held"`
}

// MeasureManyHeld acquires n locks on one client with the given TTL, holds
// them for periods renewal periods (TTL/3 each), and measures renewal round
// trips, CPU, heap and goroutines.
func MeasureManyHeld(ctx context.Context, t Target, n int, ttl time.Duration, periods int) (ManyHeld, error) {
	ttl = max(ttl, t.MinTTL)
	if t.MaxHeld > 0 {
		n = min(n, t.MaxHeld)
	}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.WithoutCancel(ctx))
	opts := append(meterOpt(mp), dlock.WithTTL(ttl))
	cs, done, err := t.clients(ctx, 1, opts...)
	if err != nil {
		return ManyHeld{}, err
	}
	defer done()
	c := cs[0]

	heap0, goroutines0 := heapInUse(), runtime.NumGoroutine()
	leases := make([]dlock.Lease, 0, n)
	base := newKey("held")
	for i := range n {
		m, err := c.Mutex(fmt.Sprintf("%s/%d", base, i))
		if err != nil {
			return ManyHeld{}, err
		}
		l, err := m.TryLock(ctx)
		if err != nil {
			return ManyHeld{}, err
		}
		leases = append(leases, l)
	}
	heap1, goroutines1 := heapInUse(), runtime.NumGoroutine()

	batches0, renewals0, err := renewalCounts(ctx, reader)
	if err != nil {
		return ManyHeld{}, err
	}
	cpu0, wall0 := cpuTime(), time.Now()
	hold := time.Duration(periods) * ttl / 3
	select {
	case <-time.After(hold):
	case <-ctx.Done():
		return ManyHeld{}, ctx.Err()
	}
	cpu1, wall1 := cpuTime(), time.Now()
	batches1, renewals1, err := renewalCounts(ctx, reader)
	if err != nil {
		return ManyHeld{}, err
	}
	for _, l := range leases {
		if l.Err() != nil {
			return ManyHeld{}, fmt.Errorf("a held lock was lost during the measurement: %w", l.Err())
		}
		_ = l.Unlock(ctx)
	}
	return ManyHeld{
		Locks:               n,
		TTL:                 ttl.String(),
		RenewalTripsPeriod:  float64(batches1-batches0) / float64(periods),
		RenewalsPerPeriod:   float64(renewals1-renewals0) / float64(periods),
		CPUFraction:         float64(cpu1-cpu0) / float64(wall1.Sub(wall0)),
		HeapPerLock:         float64(int64(heap1)-int64(heap0)) / float64(n),
		GoroutinesPerLock:   float64(goroutines1-goroutines0) / float64(n),
		GoroutinesWhileHeld: goroutines1,
	}, nil
}

// heapInUse is the live heap after two collections: sync.Pools (client
// libraries keep buffers in them) drop their contents over two, so that
// what they held does not count for or against the locks.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// renewalCounts reads dlock.renewal.batches and dlock.renewals.
func renewalCounts(ctx context.Context, reader *sdkmetric.ManualReader) (batches, renewals int64, err error) {
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		return 0, 0, err
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				continue
			}
			var total int64
			for _, dp := range sum.DataPoints {
				total += dp.Value
			}
			switch m.Name {
			case "dlock.renewal.batches":
				batches = total
			case "dlock.renewals":
				renewals = total
			}
		}
	}
	return batches, renewals, nil
}
