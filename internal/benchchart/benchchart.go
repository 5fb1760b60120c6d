// Package benchchart draws the benchmarks' grouped bar charts (dlock bench,
// and the peers comparison in bench/peers): one group of bars per backend
// or contender, one bar per series, each value written above its bar, on a
// logarithmic axis when the values are too far apart for a linear one.
package benchchart

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Series is one set of bars: a value per group, in the groups' order. A
// value of 0 is drawn as missing ("-").
type Series struct {
	Label  string
	Values []float64
}

var palette = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff},
	color.RGBA{0xff, 0x7f, 0x0e, 0xff},
	color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
}

// LogSpread is the ratio of a chart's largest value to its smallest
// positive one beyond which the chart gets a logarithmic axis: on a linear
// one, a backend 13 ms slow (RedLock's handoff) flattens every bar of a
// backend 1 ms fast into the axis.
const LogSpread = 20

// Bars draws a grouped bar chart titled title, its axis in unit, with a
// group of bars per name in groups and a bar per series in each group.
func Bars(title, unit string, groups []string, series []Series) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = unit
	p.Legend.Top = true
	p.Legend.Left = true
	p.NominalX(groups...)
	p.X.Min, p.X.Max = -0.6, float64(len(groups))-0.4
	width := vg.Points(60 / float64(len(series)))
	all := make([]plotter.Values, len(series))
	for i, s := range series {
		if len(s.Values) != len(groups) {
			return nil, fmt.Errorf("series %q has %d values for %d groups", s.Label, len(s.Values), len(groups))
		}
		all[i] = plotter.Values(s.Values)
	}
	for i, s := range series {
		bars, err := plotter.NewBarChart(all[i], width)
		if err != nil {
			return nil, err
		}
		bars.Color = palette[i%len(palette)]
		bars.LineStyle.Width = 0
		bars.Offset = width * vg.Length(float64(i)-float64(len(series)-1)/2)
		p.Add(bars)
		p.Legend.Add(s.Label, bars)
		labels, err := valueLabels(all[i], bars.Offset, width)
		if err != nil {
			return nil, err
		}
		p.Add(labels)
	}
	bottom, top := valueRange(all)
	if top > 0 && bottom > 0 && top/bottom > LogSpread {
		// Bars rise from the axis's bottom, which a log scale cannot put
		// at 0; room above the tallest for the value labels and the legend.
		// (After the bars: adding them sets the axis's range from 0.)
		p.Y.Scale = FloorLogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Y.Min = math.Pow(10, math.Floor(math.Log10(bottom)))
		p.Y.Max = top * 8
		p.Y.Label.Text = unit + " (log scale)"
	} else {
		p.Y.Min = 0
		p.Y.Max = top * 1.3 // room for the value labels and the legend
	}
	return p, nil
}

// Save writes p into dir as name.svg and name.png, width wide and 4.5
// inches high.
func Save(p *plot.Plot, dir, name string, width vg.Length) error {
	for _, ext := range []string{".svg", ".png"} {
		if err := p.Save(width, 4.5*vg.Inch, filepath.Join(dir, name+ext)); err != nil {
			return fmt.Errorf("chart %s: %w", name, err)
		}
	}
	return nil
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

// FloorLogScale is plot.LogScale for bars: a value below the axis's
// minimum (a bar's foot at 0, a missing value) sits on the axis instead of
// making LogScale panic.
type FloorLogScale struct{}

// Normalize places x on the log scale from min to max, x at least min.
func (FloorLogScale) Normalize(min, max, x float64) float64 {
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

// format writes a value with as many digits as it deserves: "-" for 0.
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
