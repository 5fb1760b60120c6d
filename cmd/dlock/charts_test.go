package main

import (
	"testing"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"

	"github.com/dlock-go/dlock/internal/benchchart"
	"github.com/dlock-go/dlock/internal/benchkit"
)

// A chart whose values span more than benchchart.LogSpread gets a log axis, on which
// the smallest bar still shows; a chart of close values keeps a linear
// axis from 0. Both draw (a log scale must not be given the bars' foot at
// 0, nor a missing value).
func TestChartScale(t *testing.T) {
	report := func(name string, p50 time.Duration) benchkit.Report {
		r := benchkit.Report{Backend: name}
		r.Uncontended.Lock.P50 = p50
		r.Uncontended.Raw.P50 = p50 / 2
		return r
	}
	latency := charts[0]
	for name, tc := range map[string]struct {
		reports []benchkit.Report
		log     bool
	}{
		"wide":  {[]benchkit.Report{report("redis", 300*time.Microsecond), report("redlock", 13*time.Millisecond), report("none", 0)}, true},
		"close": {[]benchkit.Report{report("redis", 300*time.Microsecond), report("etcd", 900*time.Microsecond)}, false},
	} {
		p, err := latency.plot(tc.reports)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, isLog := p.Y.Scale.(benchchart.FloorLogScale); isLog != tc.log || (!tc.log && p.Y.Min != 0) {
			t.Errorf("%s: scale %T from %v, want log %t", name, p.Y.Scale, p.Y.Min, tc.log)
		}
		if tc.log && (p.Y.Min <= 0 || p.Y.Min > 150) {
			t.Errorf("%s: log axis from %v, want a power of ten at or below the smallest value (150 µs)", name, p.Y.Min)
		}
		if _, err := p.WriterTo(4*vg.Inch, 3*vg.Inch, "png"); err != nil {
			t.Errorf("%s: drawing: %v", name, err)
		}
	}
	var _ plot.Normalizer = benchchart.FloorLogScale{}
}
