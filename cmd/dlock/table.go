package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/dlock-go/dlock/internal/benchkit"
)

// printTable prints one row per backend, "failed" in the cells of a step
// that failed, then each failed step with its error, then what was
// skipped.
func printTable(out io.Writer, res results) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "backend\tuncontended p50\tvs raw\thandoff p50: 1 waiter\t16 in 1 client\t16 in 16 clients\trequests/cs (16 in 1)\tcs/s 8 goroutines\tcs/s 64\tJain 64\tmax/p50 wait 64\tpolling lock cs/s 64 (Jain)\theld locks\trenewal batches/period\theap/lock\tsemaphore p50 (lock p50)\tsemaphore cs/s 16 (Jain)\tfailover p50 / p95 (TTL)\t")
	for _, r := range res.Reports {
		// or is the cell of step: its figure, or "failed".
		or := func(step, figure string) string {
			if r.FailedStep(step) != "" {
				return "failed"
			}
			return figure
		}
		h11, h161, h1616 := benchkit.StepHandoff(1, 1), benchkit.StepHandoff(16, 1), benchkit.StepHandoff(16, 16)
		c8, c64 := benchkit.StepContended(8), benchkit.StepContended(64)
		cells := []string{
			r.Backend,
			or(benchkit.StepUncontended, benchkit.Short(r.Uncontended.Lock.P50)), or(benchkit.StepUncontended, ratio(r.Uncontended.Ratio)),
			or(h11, benchkit.Short(handoff(r, 1, 1).Latency.P50)), or(h161, benchkit.Short(handoff(r, 16, 1).Latency.P50)),
			or(h1616, benchkit.Short(handoff(r, 16, 16).Latency.P50)), or(h161, benchkit.PerOp(handoff(r, 16, 1).Requests)),
			or(c8, fmt.Sprintf("%.0f", contended(r, 8).PerSecond)), or(c64, fmt.Sprintf("%.0f", contended(r, 64).PerSecond)),
			or(c64, fmt.Sprintf("%.2f", contended(r, 64).Jain)), or(c64, fmt.Sprintf("%.1f", contended(r, 64).MaxOverP50)),
			or(benchkit.StepPolled, polled(r)),
			or(benchkit.StepHeld, fmt.Sprintf("%d", r.Held.Locks)), or(benchkit.StepHeld, fmt.Sprintf("%.1f", r.Held.RenewalTripsPeriod)),
			or(benchkit.StepHeld, fmt.Sprintf("%.0f B", r.Held.HeapPerLock)),
			or(benchkit.StepSemaphore, semaphoreLatency(r)), or(benchkit.StepSemaphore, semaphoreContended(r)),
			or(benchkit.StepFailover, failover(r)),
		}
		fmt.Fprintln(w, strings.Join(cells, "\t")+"\t")
	}
	w.Flush()
	for _, r := range res.Reports {
		for _, f := range r.Failed {
			fmt.Fprintf(out, "failed %s: %s: %s\n", r.Backend, f.Step, f.Error)
		}
	}
	for _, s := range res.Skipped {
		fmt.Fprintf(out, "skipped %s: %s\n", s.Backend, s.Reason)
	}
}

// failedSteps counts the steps that failed in reports.
func failedSteps(reports []benchkit.Report) int {
	n := 0
	for _, r := range reports {
		n += len(r.Failed)
	}
	return n
}

func handoff(r benchkit.Report, waiters, clients int) benchkit.Handoff {
	for _, h := range r.Handoff {
		if h.Waiters == waiters && h.Clients == clients {
			return h
		}
	}
	return benchkit.Handoff{}
}

func contended(r benchkit.Report, goroutines int) benchkit.Contended {
	for _, c := range r.Contended {
		if c.Goroutines == goroutines {
			return c
		}
	}
	return benchkit.Contended{}
}

// polled is the raw polling lock's throughput and fairness, or "-".
func polled(r benchkit.Report) string {
	if r.Polled == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f (%.2f)", r.Polled.PerSecond, r.Polled.Jain)
}

func ratio(x float64) string {
	if x == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", x)
}

// semaphoreLatency is a semaphore's uncontended Acquire+Unlock p50 beside
// a Mutex's Lock+Unlock, or "-".
func semaphoreLatency(r benchkit.Report) string {
	if r.Semaphore == nil {
		return "-"
	}
	return fmt.Sprintf("%s (%s)", benchkit.Short(r.Semaphore.Uncontended.P50), benchkit.Short(r.Semaphore.Lock.P50))
}

// semaphoreContended is a semaphore's contended throughput and fairness,
// or "-".
func semaphoreContended(r benchkit.Report) string {
	if r.Semaphore == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f (%.2f)", r.Semaphore.Contended.PerSecond, r.Semaphore.Contended.Jain)
}

// failover is an election's failover time after its leader's crash, p50
// and p95, beside the leadership's TTL, or "-".
func failover(r benchkit.Report) string {
	if r.Failover == nil || r.Failover.N == 0 {
		return "-"
	}
	return fmt.Sprintf("%s / %s (%s)", benchkit.Short(r.Failover.P50), benchkit.Short(r.Failover.P95), benchkit.Short(r.Failover.TTL))
}
