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
	Wait       Latency       `json:"wait"`       // time each Lock call waited; Max counts calls still waiting at the run's end
	MaxOverP50 float64       `json:"max_over_p50"`
	Duration   time.Duration `json:"duration_ns"`
	Sections   int           `json:"sections"`           // critical sections in the run
	Requests   float64       `json:"requests,omitempty"` // backend requests per critical section, when counted
	CPU        *CPU          `json:"cpu,omitempty"`      // what the run cost the machine, where it can be read
}

// MeasureContended runs goroutines, spread over clients clients, locking and
// unlocking one key as fast as they can for d.
func MeasureContended(ctx context.Context, t Target, goroutines, clients int, d time.Duration) (Contended, error) {
	cs, done, err := t.clients(ctx, clients)
	if err != nil {
		return Contended{}, err
	}
	defer done()
	ls, err := mutexLockers(cs, newKey("contended"), goroutines)
	if err != nil {
		return Contended{}, err
	}
	for g, l := range ls {
		ls[g] = ignoreUnlockErrors(l)
	}
	return MeasureContendedLockers(ctx, ls, clients, d, t.Requests)
}

// ignoreUnlockErrors is l whose releases never fail the run: dlock's
// contended figures have always been taken that way (an Unlock that finds
// its lease lost would be a safety failure, which the conformance suite,
// not the benchmark, is there to find).
func ignoreUnlockErrors(l Locker) Locker {
	return LockerFunc(func(ctx context.Context) (func(context.Context) error, error) {
		unlock, err := l.Lock(ctx)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) error { _ = unlock(ctx); return nil }, nil
	})
}

// MeasureContendedLockers runs a goroutine per locker, all on one lock,
// each taking and giving it back as fast as it can for d; clients is how
// many independent clients the lockers are spread over, for the report.
// Requests, when not nil, counts the backend's requests (Contended.Requests).
// The first error of a Lock or an unlock before the run's end fails the run.
func MeasureContendedLockers(ctx context.Context, lockers []Locker, clients int, d time.Duration, requests func() uint64) (Contended, error) {
	runCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	goroutines := len(lockers)
	counts := make([]int, goroutines)
	waits := make([][]time.Duration, goroutines)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	var pending time.Duration // the longest wait cut short by the run's end
	fail := func(err error) {
		if runCtx.Err() == nil {
			mu.Lock()
			firstErr = err
			mu.Unlock()
		}
	}
	r0 := startCount(requests)
	cpu0 := markCPU()
	start := time.Now()
	for g, l := range lockers {
		wg.Go(func() {
			for runCtx.Err() == nil {
				t0 := time.Now()
				unlock, err := l.Lock(runCtx)
				if err != nil {
					if runCtx.Err() != nil {
						// Still waiting when the run ended: the wait
						// counts towards the longest, or a contender
						// starved for the whole run would not show.
						mu.Lock()
						pending = max(pending, time.Since(t0))
						mu.Unlock()
					}
					fail(err)
					return
				}
				waits[g] = append(waits[g], time.Since(t0))
				counts[g]++
				if err := unlock(ctx); err != nil {
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
	c := contendedStats(goroutines, clients, counts, waits, elapsed)
	if pending > c.Wait.Max {
		c.Wait.Max = pending
		if c.Wait.P50 > 0 {
			c.MaxOverP50 = float64(c.Wait.Max) / float64(c.Wait.P50)
		}
	}
	c.Requests = perSection(requests, r0, c.Sections)
	c.CPU = cpuSince(cpu0, c.Sections)
	return c, nil
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
	c := Contended{Goroutines: goroutines, Clients: clients, PerSecond: sum / elapsed.Seconds(), Wait: summarize(all), Duration: elapsed, Sections: int(sum)}
	if squares > 0 {
		c.Jain = sum * sum / (float64(goroutines) * squares)
	}
	if c.Wait.P50 > 0 {
		c.MaxOverP50 = float64(c.Wait.Max) / float64(c.Wait.P50)
	}
	return c
}
