// Package benchkit measures lock backends the same way everywhere: in each
// driver's `go test -bench` benchmarks and in the `dlock bench` command. Every
// measurement compares, where it can, with the raw client operations the
// driver needs (the physical limit), in the same run.
package benchkit

import (
	"context"
	"crypto/rand"
	"slices"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/dlock-go/dlock"
)

// Target is one backend to measure.
type Target struct {
	// Name names the backend in reports ("redis", "memory", ...).
	Name string
	// NewClient makes a new, independent dlock client of the backend (its own
	// connections, as another process would have). The options are the
	// kit's; the target adds its own.
	NewClient func(ctx context.Context, opts ...dlock.Option) (*dlock.Client, error)
	// Raw runs once the raw client operations one uncontended lock and
	// unlock need on key, without dlock (for Redis: SET NX PX, then DEL).
	// Nil when the backend has no meaningful raw equivalent.
	Raw func(ctx context.Context, key string) error
	// Requests returns how many requests all clients of the target have sent
	// to the backend so far (a pipeline counts once). Nil when unknown.
	Requests func() uint64
	// Poller is the raw polling lock that contended throughput is compared
	// with. Nil when the backend has none worth comparing.
	Poller *Poller
	// MinTTL is the backend's shortest TTL; measurements that choose a TTL
	// use at least this. Zero: the core's minimum.
	MinTTL time.Duration
	// MaxHeld caps the locks one client holds in the held-locks measurement,
	// for backends that spend a connection per held lock. Zero: no cap.
	MaxHeld int
}

// Latency summarises a set of durations.
type Latency struct {
	N    int           `json:"n"`
	P50  time.Duration `json:"p50_ns"`
	P99  time.Duration `json:"p99_ns"`
	Mean time.Duration `json:"mean_ns"`
	Max  time.Duration `json:"max_ns"`
}

// summarize sorts ds in place and summarises it.
func summarize(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	slices.Sort(ds)
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	at := func(q float64) time.Duration { return ds[min(len(ds)-1, int(q*float64(len(ds))))] }
	return Latency{N: len(ds), P50: at(0.50), P99: at(0.99), Mean: sum / time.Duration(len(ds)), Max: ds[len(ds)-1]}
}

// newKey returns a key no other measurement uses.
func newKey(what string) string { return "bench/" + what + "/" + rand.Text()[:10] }

// clients makes n clients with opts, closed by the returned func.
func (t Target) clients(ctx context.Context, n int, opts ...dlock.Option) ([]*dlock.Client, func(), error) {
	var cs []*dlock.Client
	closeAll := func() {
		for _, c := range cs {
			_ = c.Close(context.WithoutCancel(ctx))
		}
	}
	for range n {
		c, err := t.NewClient(ctx, opts...)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		cs = append(cs, c)
	}
	return cs, closeAll, nil
}

// meterOpt is WithMeterProvider for a provider, or nothing.
func meterOpt(mp metric.MeterProvider) []dlock.Option {
	if mp == nil {
		return nil
	}
	return []dlock.Option{dlock.WithMeterProvider(mp)}
}
