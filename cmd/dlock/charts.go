package main

import (
	"fmt"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"

	"github.com/dlock-go/dlock/internal/benchchart"
	"github.com/dlock-go/dlock/internal/benchkit"
)

// series is one set of bars in a grouped bar chart: a value per backend.
type series struct {
	label  string
	values func(benchkit.Report) float64
}

// chart is one comparison across backends.
type chart struct {
	file, title, unit string
	series            []series
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

var charts = []chart{
	{"latency", "Uncontended acquire+release, p50 (lower is better)", "µs", []series{
		{"dlock Lock+Unlock", func(r benchkit.Report) float64 { return micros(r.Uncontended.Lock.P50) }},
		{"raw client commands", func(r benchkit.Report) float64 { return micros(r.Uncontended.Raw.P50) }},
	}},
	{"handoff", "Handoff: release to next holder, p50 (lower is better)", "µs", []series{
		{"1 waiter", func(r benchkit.Report) float64 { return micros(handoff(r, 1, 1).Latency.P50) }},
		{"16 waiters, 1 client", func(r benchkit.Report) float64 { return micros(handoff(r, 16, 1).Latency.P50) }},
		{"16 waiters, 16 clients", func(r benchkit.Report) float64 { return micros(handoff(r, 16, 16).Latency.P50) }},
	}},
	{"throughput", "Contended throughput on one key (higher is better)", "critical sections per second", []series{
		{"8 goroutines", func(r benchkit.Report) float64 { return contended(r, 8).PerSecond }},
		{"64 goroutines", func(r benchkit.Report) float64 { return contended(r, 64).PerSecond }},
	}},
	{"requests", "Backend requests per critical section, 16 waiters (lower is better)", "requests", []series{
		{"16 waiters, 1 client", func(r benchkit.Report) float64 { return handoff(r, 16, 1).Requests }},
		{"16 waiters, 16 clients", func(r benchkit.Report) float64 { return handoff(r, 16, 16).Requests }},
	}},
}

// writeCharts writes every chart as SVG and PNG into dir. The in-process
// backend is left out when there are others: it is orders of magnitude
// faster than any network, and would flatten their bars (it stays in the
// table and in results.json).
func writeCharts(dir string, reports []benchkit.Report) error {
	if networked := slices.DeleteFunc(slices.Clone(reports), func(r benchkit.Report) bool { return r.Backend == "memory" }); len(networked) > 0 {
		reports = networked
	}
	if len(reports) == 0 {
		return nil
	}
	for _, c := range charts {
		p, err := c.plot(reports)
		if err != nil {
			return fmt.Errorf("chart %s: %w", c.file, err)
		}
		if err := benchchart.Save(p, dir, c.file, 8*vg.Inch); err != nil {
			return err
		}
	}
	return nil
}

// plot draws c over reports: a group of bars per backend.
func (c chart) plot(reports []benchkit.Report) (*plot.Plot, error) {
	names := make([]string, len(reports))
	for i, r := range reports {
		names[i] = r.Backend
	}
	series := make([]benchchart.Series, len(c.series))
	for i, s := range c.series {
		series[i] = benchchart.Series{Label: s.label, Values: make([]float64, len(reports))}
		for j, r := range reports {
			series[i].Values[j] = s.values(r)
		}
	}
	return benchchart.Bars(c.title, c.unit, names, series)
}
