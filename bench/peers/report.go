package main

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"
	"time"

	"gonum.org/v1/plot/vg"

	"github.com/dlock-go/dlock/internal/benchchart"
	"github.com/dlock-go/dlock/internal/benchkit"
)

// printTable prints a row per contender, grouped by backend, then what was
// skipped.
func printTable(out io.Writer, res results) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "backend\tcontender\tacquire+release p50\tp99\trequests\thandoff p50, 1 waiter\t16 waiters\trequests/cs (16)\tcs/s, contended\tclients\tJain\tlongest wait\tmax/p50\trequests/cs\tCPU/cs machine\tprocess\tbusy\t")
	for _, r := range res.Rows {
		p50, p99 := "=", "="
		if r.Uncontended != nil {
			p50, p99 = benchkit.Short(r.Uncontended.P50), benchkit.Short(r.Uncontended.P99)
		}
		h1, h16 := r.handoff(1), r.handoff(16)
		c := r.Contended
		machine, process, busy := "–", "–", "–"
		if c.CPU != nil {
			machine, process, busy = benchkit.Short(c.CPU.Machine), benchkit.Short(c.CPU.Process), fmt.Sprintf("%.0f%%", 100*c.CPU.Busy)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f\t%d\t%.2f\t%s\t%.0f\t%s\t%s\t%s\t%s\t\n",
			r.Backend, r.Contender, p50, p99, benchkit.PerOp(r.UncontendedRequests),
			benchkit.Short(h1.Latency.P50), benchkit.Short(h16.Latency.P50), benchkit.PerOp(h16.Requests),
			c.PerSecond, c.Clients, c.Jain, benchkit.Short(c.Wait.Max), c.MaxOverP50, benchkit.PerOp(c.Requests),
			machine, process, busy)
	}
	w.Flush()
	for _, s := range res.Skipped {
		fmt.Fprintf(out, "skipped %s: %s\n", s.Backend, s.Reason)
	}
}

// printMarkdown prints the README's table: a row per contender, the
// backend named on its first row only.
func printMarkdown(out io.Writer, res results) {
	fmt.Fprintln(out, "| backend | contender | acquire+release p50 (p99) | handoff p50, 1 waiter / 16 waiters | critical sections/s, 64 contenders (Jain, longest wait) | requests per critical section | CPU per critical section: machine (clients), cores busy |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|")
	for i, r := range res.Rows {
		backend := r.Backend
		if i > 0 && res.Rows[i-1].Backend == r.Backend {
			backend = ""
		}
		uncontended := "="
		if r.Uncontended != nil {
			uncontended = fmt.Sprintf("%s (%s)", benchkit.Short(r.Uncontended.P50), benchkit.Short(r.Uncontended.P99))
		}
		c := r.Contended
		cpu := "–"
		if c.CPU != nil {
			cpu = fmt.Sprintf("%s (%s), %.0f%%", benchkit.Short(c.CPU.Machine), benchkit.Short(c.CPU.Process), 100*c.CPU.Busy)
		}
		fmt.Fprintf(out, "| %s | %s | %s | %s / %s | %s (%.2f, %s) | %s | %s |\n", backend, r.Contender, uncontended,
			benchkit.Short(r.handoff(1).Latency.P50), benchkit.Short(r.handoff(16).Latency.P50),
			thousands(c.PerSecond), c.Jain, benchkit.Short(c.Wait.Max), benchkit.PerOp(c.Requests), cpu)
	}
	for _, s := range res.Skipped {
		fmt.Fprintf(out, "\nskipped %s: %s\n", s.Backend, s.Reason)
	}
}

// thousands writes x rounded, with a comma between thousands; below 10,
// with a decimal (a run that let one contender through in 3 s is not 0).
func thousands(x float64) string {
	if x < 10 {
		return fmt.Sprintf("%.1f", x)
	}
	return grouped(int64(math.Round(x)))
}

// grouped writes n with a comma between thousands.
func grouped(n int64) string {
	if n < 1000 {
		return fmt.Sprint(n)
	}
	return grouped(n/1000) + fmt.Sprintf(",%03d", n%1000)
}

// handoff is r's handoff to waiters waiters, or none.
func (r row) handoff(waiters int) benchkit.Handoff {
	for _, h := range r.Handoff {
		if h.Waiters == waiters {
			return h
		}
	}
	return benchkit.Handoff{}
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// peerChart is one chart: a group of bars per contender.
type peerChart struct {
	file, title, unit string
	series            []peerSeries
}

type peerSeries struct {
	label string
	value func(row) float64
}

var peerCharts = []peerChart{
	{"peers-handoff", "Handoff: release to the next holder, p50 (lower is better)", "ms", []peerSeries{
		{"1 waiter", func(r row) float64 { return millis(r.handoff(1).Latency.P50) }},
		{"16 waiters", func(r row) float64 { return millis(r.handoff(16).Latency.P50) }},
	}},
	{"peers-throughput", "Contended throughput on one key (higher is better)", "critical sections per second", []peerSeries{
		{"contenders on one key (dlock, one Client: goroutines of one Client; the others: a client each)", func(r row) float64 { return r.Contended.PerSecond }},
	}},
	{"peers-latency", "Uncontended acquire+release (lower is better)", "ms", []peerSeries{
		{"p50", func(r row) float64 {
			return millisOf(r.Uncontended, func(l benchkit.Latency) time.Duration { return l.P50 })
		}},
		{"p99", func(r row) float64 {
			return millisOf(r.Uncontended, func(l benchkit.Latency) time.Duration { return l.P99 })
		}},
	}},
}

// millisOf is a figure of l in milliseconds, 0 when there is no l.
func millisOf(l *benchkit.Latency, f func(benchkit.Latency) time.Duration) float64 {
	if l == nil {
		return 0
	}
	return millis(f(*l))
}

// writeCharts writes each chart into dir as SVG and PNG: a group of bars
// per contender, named "backend: contender".
func writeCharts(dir string, rows []row) error {
	if len(rows) == 0 {
		return nil
	}
	names := make([]string, len(rows))
	for i, r := range rows {
		names[i] = r.Backend + ":\n" + r.Contender
	}
	for _, c := range peerCharts {
		series := make([]benchchart.Series, len(c.series))
		for i, s := range c.series {
			series[i] = benchchart.Series{Label: s.label, Values: make([]float64, len(rows))}
			for j, r := range rows {
				series[i].Values[j] = s.value(r)
			}
		}
		p, err := benchchart.Bars(c.title, c.unit, names, series)
		if err != nil {
			return fmt.Errorf("chart %s: %w", c.file, err)
		}
		if err := benchchart.Save(p, dir, c.file, vg.Length(len(rows))*1.2*vg.Inch+vg.Inch); err != nil {
			return err
		}
	}
	return nil
}
