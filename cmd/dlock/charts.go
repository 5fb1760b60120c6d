package main

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

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

var palette = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff},
	color.RGBA{0xff, 0x7f, 0x0e, 0xff},
	color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
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
		for _, ext := range []string{".svg", ".png"} {
			if err := p.Save(8*vg.Inch, 4.5*vg.Inch, filepath.Join(dir, c.file+ext)); err != nil {
				return fmt.Errorf("chart %s: %w", c.file, err)
			}
		}
	}
	return nil
}

// logSpread is the ratio of a chart's largest value to its smallest
// positive one beyond which the chart gets a logarithmic axis: on a linear
// one, a backend 13 ms slow (RedLock's handoff) flattens every bar of a
// backend 1 ms fast into the axis.
const logSpread = 20

func (c chart) plot(reports []benchkit.Report) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = c.title
	p.Y.Label.Text = c.unit
	p.Legend.Top = true
	p.Legend.Left = true
	names := make([]string, len(reports))
	for i, r := range reports {
		names[i] = r.Backend
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.6, float64(len(reports))-0.4
	width := vg.Points(60 / float64(len(c.series)))
	all := make([]plotter.Values, len(c.series))
	for i, s := range c.series {
		all[i] = make(plotter.Values, len(reports))
		for j, r := range reports {
			all[i][j] = s.values(r)
		}
	}
	for i, s := range c.series {
		bars, err := plotter.NewBarChart(all[i], width)
		if err != nil {
			return nil, err
		}
		bars.Color = palette[i%len(palette)]
		bars.LineStyle.Width = 0
		bars.Offset = width * vg.Length(float64(i)-float64(len(c.series)-1)/2)
		p.Add(bars)
		p.Legend.Add(s.label, bars)
		labels, err := valueLabels(all[i], bars.Offset, width)
		if err != nil {
			return nil, err
		}
		p.Add(labels)
	}
	bottom, top := valueRange(all)
	if top > 0 && bottom > 0 && top/bottom > logSpread {
		// Bars rise from the axis's bottom, which a log scale cannot put
		// at 0; room above the tallest for the value labels and the legend.
		// (After the bars: adding them sets the axis's range from 0.)
		p.Y.Scale = floorLogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Y.Min = math.Pow(10, math.Floor(math.Log10(bottom)))
		p.Y.Max = top * 8
		p.Y.Label.Text = c.unit + " (log scale)"
	} else {
		p.Y.Min = 0
		p.Y.Max = top * 1.3 // room for the value labels and the legend
	}
	return p, nil
}

// valueRange returns the smallest positive value and the largest value of
// a chart; 0 for either when there is none.
func valueRange(all []plotter.Values) (bottom, top float64) {
	for _, values := range all {
		for _, v := range values {
			top = max(top, v)
			if v > 0 && (bottom == 0 || v < bottom) {
				bottom = v
			}
		}
	}
	return bottom, top
}

// floorLogScale is plot.LogScale for bars: a value below the axis's
// minimum (a bar's foot at 0, a missing value) sits on the axis instead of
// making LogScale panic.
type floorLogScale struct{}

// Normalize places x on the log scale from min to max, x at least min.
func (floorLogScale) Normalize(min, max, x float64) float64 {
	return plot.LogScale{}.Normalize(min, max, math.Max(x, min))
}

// valueLabels writes each bar's value above it.
func valueLabels(values plotter.Values, offset, width vg.Length) (*plotter.Labels, error) {
	xys := make(plotter.XYs, len(values))
	texts := make([]string, len(values))
	for i, v := range values {
		xys[i] = plotter.XY{X: float64(i), Y: v}
		texts[i] = format(v)
	}
	labels, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: texts})
	if err != nil {
		return nil, err
	}
	for i := range labels.TextStyle {
		labels.TextStyle[i].XAlign = -0.5
		labels.TextStyle[i].YAlign = 0
		labels.TextStyle[i].Font.Size = vg.Points(8)
	}
	labels.Offset = vg.Point{X: offset - width/2, Y: vg.Points(2)}
	return labels, nil
}

func format(v float64) string {
	switch {
	case v == 0:
		return "-"
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}
