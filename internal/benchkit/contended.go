package benchkit

import (
	"context"
	"sync"
	"time"
)

// Contended is throughput and fairness with many goroutines on one key.
type Contended struct {
	Goroutines int           `json:"goroutines"`
	Clients    int           `json:"clients"`
	PerSecond  float64       `json:"per_second"` // critical sections per second
	Jain       float64       `json:"jain"`       // Jain's fairness index of per-goroutine counts: 1 is perfectly fair
	Wait       Latency       `json:"wait"`       // time each Lock call waited
	MaxOverP50 float64       `json:"max_over_p50"`
	Duration   time.Duration `json:"duration_ns"`
}

// MeasureContended runs goroutines, spread over clients clients, locking and
// unlocking one key as fast as they can for d.
func MeasureContended(ctx context.Context, t Target, goroutines, clients int, d time.Duration) (Contended, error) {
	cs, done, err := t.clients(ctx, clients)
	if err != nil {
		return Contended{}, err
	}
	defer done()
	key := newKey("contended")
	runCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	counts := make([]int, goroutines)
	waits := make([][]time.Duration, goroutines)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	start := time.Now()
	for g := range goroutines {
		m, err := cs[g%clients].Mutex(key)
		if err != nil {
			return Contended{}, err
		}
		wg.Go(func() {
			for runCtx.Err() == nil {
				t0 := time.Now()
				l, err := m.Lock(runCtx)
				if err != nil {
					if runCtx.Err() == nil {
						mu.Lock()
						firstErr = err
						mu.Unlock()
					}
					return
				}
				waits[g] = append(waits[g], time.Since(t0))
				counts[g]++
				_ = l.Unlock(ctx)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return Contended{}, firstErr
	}
	return contendedStats(goroutines, clients, counts, waits, elapsed), nil
}

// contendedStats summarises a contended run: each goroutine's number of
// critical sections and the time each of its acquisitions waited.
func contendedStats(goroutines, clients int, counts []int, waits [][]time.Duration, elapsed time.Duration) Contended {
	var all []time.Duration
	var sum, squares float64
	for g := range goroutines {
		all = append(all, waits[g]...)
		x := float64(counts[g])
		sum += x
		squares += x * x
	}
	c := Contended{Goroutines: goroutines, Clients: clients, PerSecond: sum / elapsed.Seconds(), Wait: summarize(all), Duration: elapsed}
	if squares > 0 {
		c.Jain = sum * sum / (float64(goroutines) * squares)
	}
	if c.Wait.P50 > 0 {
		c.MaxOverP50 = float64(c.Wait.Max) / float64(c.Wait.P50)
	}
	return c
}
