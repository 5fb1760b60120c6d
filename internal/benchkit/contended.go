package benchkit

import (
	"context"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
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
	ms := make([]dlock.Mutex, goroutines)
	for g := range ms {
		if ms[g], err = cs[g%clients].Mutex(key); err != nil {
			return Contended{}, err
		}
	}
	return contend(ctx, goroutines, clients, d, func(runCtx context.Context, g int) (func() error, error) {
		l, err := ms[g].Lock(runCtx)
		if err != nil {
			return nil, err
		}
		return func() error { _ = l.Unlock(ctx); return nil }, nil
	})
}

// contend runs goroutines for d, each taking and giving back one lock as
// fast as it can: acquire takes it for goroutine g, waiting at most until
// runCtx ends, and returns how to give it back. The first error of an
// acquire or a release before the run's end fails the run.
func contend(ctx context.Context, goroutines, clients int, d time.Duration, acquire func(runCtx context.Context, g int) (release func() error, err error)) (Contended, error) {
	runCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	counts := make([]int, goroutines)
	waits := make([][]time.Duration, goroutines)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	fail := func(err error) {
		if runCtx.Err() == nil {
			mu.Lock()
			firstErr = err
			mu.Unlock()
		}
	}
	start := time.Now()
	for g := range goroutines {
		wg.Go(func() {
			for runCtx.Err() == nil {
				t0 := time.Now()
				release, err := acquire(runCtx, g)
				if err != nil {
					fail(err)
					return
				}
				waits[g] = append(waits[g], time.Since(t0))
				counts[g]++
				if err := release(); err != nil {
					fail(err)
					return
				}
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
