package benchkit

import (
	"context"
	"fmt"
	"time"
)

// Sizes sets how much work each measurement does.
type Sizes struct {
	UncontendedRounds int
	HandoffRounds     int
	ContendedFor      time.Duration
	HeldLocks         int
	HeldTTL           time.Duration
	HeldPeriods       int
	// FailoverRounds leader crashes are timed on a leadership TTL of
	// FailoverTTL (at least the target's MinTTL).
	FailoverRounds int
	FailoverTTL    time.Duration
}

// Standard are the sizes of `go test -bench` and `dlock bench`.
var Standard = Sizes{
	UncontendedRounds: uncontendedRounds,
	HandoffRounds:     handoffRounds,
	ContendedFor:      contendedFor,
	HeldLocks:         heldLocks,
	HeldTTL:           heldTTL,
	HeldPeriods:       heldPeriods,
	FailoverRounds:    failoverRounds,
	FailoverTTL:       failoverTTL,
}

// Quick are sizes for a smoke run: seconds per backend, figures only roughly
// meaningful.
var Quick = Sizes{
	UncontendedRounds: 50,
	HandoffRounds:     30,
	ContendedFor:      300 * time.Millisecond,
	HeldLocks:         200,
	HeldTTL:           time.Second, // renewals must keep 200 locks through a scheduler stall on a loaded machine
	HeldPeriods:       1,
	FailoverRounds:    2,
	FailoverTTL:       time.Second,
}

// Report is every measurement of one backend.
type Report struct {
	Backend     string      `json:"backend"`
	Uncontended Uncontended `json:"uncontended"`
	Handoff     []Handoff   `json:"handoff"`
	Contended   []Contended `json:"contended"`
	// Polled is contended throughput of the raw polling lock (Target.Poller)
	// at the largest goroutine count, for comparison.
	Polled *Contended `json:"polled,omitempty"`
	Held   ManyHeld   `json:"held"`
	// Semaphore is a Semaphore of 4 permits (absent from results taken
	// before it was measured).
	Semaphore *Semaphore `json:"semaphore,omitempty"`
	// Failover is an election's leader crashing with a follower waiting
	// (absent from results taken before it was measured).
	Failover *Failover `json:"failover,omitempty"`
}

// Suite runs every measurement of the standard suite against t, telling
// progress what it is doing.
func Suite(ctx context.Context, t Target, s Sizes, progress func(string)) (Report, error) {
	r := Report{Backend: t.Name}
	step := func(what string) { progress(fmt.Sprintf("%s: %s", t.Name, what)) }
	var err error
	step("uncontended acquire+release")
	if r.Uncontended, err = MeasureUncontended(ctx, t, s.UncontendedRounds); err != nil {
		return r, fmt.Errorf("uncontended: %w", err)
	}
	for _, c := range []struct{ waiters, clients int }{{1, 1}, {16, 1}, {16, 16}} {
		step(fmt.Sprintf("handoff to %d waiter(s) in %d client(s)", c.waiters, c.clients))
		h, err := MeasureHandoff(ctx, t, c.waiters, c.clients, s.HandoffRounds)
		if err != nil {
			return r, fmt.Errorf("handoff: %w", err)
		}
		r.Handoff = append(r.Handoff, h)
	}
	for _, g := range []int{8, 64} {
		step(fmt.Sprintf("contended, %d goroutines", g))
		c, err := MeasureContended(ctx, t, g, min(g, 8), s.ContendedFor)
		if err != nil {
			return r, fmt.Errorf("contended: %w", err)
		}
		r.Contended = append(r.Contended, c)
	}
	if t.Poller != nil {
		step("contended, 64 goroutines, raw polling lock")
		c, err := MeasurePolledContended(ctx, t.Poller, 64, s.ContendedFor)
		if err != nil {
			return r, fmt.Errorf("polled: %w", err)
		}
		r.Polled = &c
	}
	step(fmt.Sprintf("semaphore of %d permits", semaphorePermits))
	sem, err := MeasureSemaphore(ctx, t, s.UncontendedRounds, s.ContendedFor)
	if err != nil {
		return r, fmt.Errorf("semaphore: %w", err)
	}
	r.Semaphore = &sem
	step(fmt.Sprintf("election failover, %d crashes", s.FailoverRounds))
	f, err := MeasureFailover(ctx, t, s.FailoverRounds, s.FailoverTTL)
	if err != nil {
		return r, fmt.Errorf("failover: %w", err)
	}
	r.Failover = &f
	step(fmt.Sprintf("%d held locks", s.HeldLocks))
	if r.Held, err = MeasureManyHeld(ctx, t, s.HeldLocks, s.HeldTTL, s.HeldPeriods); err != nil {
		return r, fmt.Errorf("held: %w", err)
	}
	return r, nil
}
