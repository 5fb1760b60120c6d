package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/dlock-go/dlock/internal/benchkit"
)

// printTable prints one row per backend, then what was skipped.
func printTable(out io.Writer, res results) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "backend\tuncontended p50\tvs raw\thandoff p50: 1 waiter\t16 in 1 client\t16 in 16 clients\trequests/cs (16 in 1)\tcs/s 8 goroutines\tcs/s 64\tJain 64\tmax/p50 wait 64\tpolling lock cs/s 64 (Jain)\theld locks\trenewal batches/period\theap/lock\tsemaphore p50 (lock p50)\tsemaphore cs/s 16 (Jain)\tfailover p50 / p95 (TTL)\t")
	for _, r := range res.Reports {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f\t%.0f\t%.2f\t%.1f\t%s\t%d\t%.1f\t%.0f B\t%s\t%s\t%s\t\n",
			r.Backend, benchkit.Short(r.Uncontended.Lock.P50), ratio(r.Uncontended.Ratio),
			benchkit.Short(handoff(r, 1, 1).Latency.P50), benchkit.Short(handoff(r, 16, 1).Latency.P50), benchkit.Short(handoff(r, 16, 16).Latency.P50),
			benchkit.PerOp(handoff(r, 16, 1).Requests), contended(r, 8).PerSecond, contended(r, 64).PerSecond,
			contended(r, 64).Jain, contended(r, 64).MaxOverP50, polled(r), r.Held.Locks, r.Held.RenewalTripsPeriod, r.Held.HeapPerLock,
			semaphoreLatency(r), semaphoreContended(r), failover(r))
	}
	w.Flush()
	for _, s := range res.Skipped {
		fmt.Fprintf(out, "skipped %s: %s\n", s.Backend, s.Reason)
	}
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
