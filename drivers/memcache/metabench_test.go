package memcache

import (
	"context"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
)

// BenchmarkUncontendedMeta is BenchmarkUncontended for a Driver that knows
// its client's server selector (as one made from a URL does), whose
// uncontended path speaks meta commands (metacas.go). rt/op counts round
// trips: one write of a pipelined round is one.
func BenchmarkUncontendedMeta(b *testing.B) {
	var w wire
	mc := w.client(b, server.URL)
	var sel gomemcache.ServerList
	if err := sel.SetServers(serverAddrs(b, server.URL)...); err != nil {
		b.Fatal(err)
	}
	c := testkit.Client(b, newTestDriver(b, mc, WithSelector(&sel)), dlock.WithTTL(15*time.Second))
	key := testkit.Key(b)
	m := testkit.Mutex(b, c, key)
	rawKey := namesOf("bench-raw:", key).lock
	ctx := context.Background()
	var raw, lib time.Duration
	var rawReqs, libReqs int64
	for b.Loop() {
		r0, t0 := w.requests.Load(), time.Now()
		if err := mc.Add(&gomemcache.Item{Key: rawKey, Value: []byte("x"), Expiration: 15}); err != nil {
			b.Fatal(err)
		}
		if err := mc.Delete(rawKey); err != nil {
			b.Fatal(err)
		}
		r1, t1 := w.requests.Load(), time.Now()
		l := testkit.Lock(b, ctx, m)
		if err := l.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
		raw += t1.Sub(t0)
		lib += time.Since(t1)
		rawReqs += r1 - r0
		libReqs += w.requests.Load() - r1
	}
	n := float64(b.N)
	b.ReportMetric(float64(raw.Microseconds())/n, "raw-µs/op")
	b.ReportMetric(float64(lib.Microseconds())/n, "dlock-µs/op")
	b.ReportMetric(float64(lib)/float64(raw), "ratio")
	b.ReportMetric(float64(rawReqs)/n, "raw-rt/op")
	b.ReportMetric(float64(libReqs)/n, "dlock-rt/op")
}
