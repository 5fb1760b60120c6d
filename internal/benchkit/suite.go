package benchkit

import (
	"context"
	"errors"
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
	// Failed lists the steps that failed, in the order they ran: their
	// figures are absent or zero, and the other steps' stand.
	Failed []StepError `json:"failed,omitempty"`
}

// StepError is a step of the suite that failed, and why.
type StepError struct {
	Step  string `json:"step"` // one of the Step names
	Error string `json:"error"`
}

// The steps of the suite, as Report.Failed names them.
const (
	StepUncontended = "uncontended acquire+release"
	StepPolled      = "contended, 64 goroutines, raw polling lock"
	StepSemaphore   = "semaphore"
	StepFailover    = "election failover"
	StepHeld        = "held locks"
)

// StepHandoff names the step that measures handoff to waiters waiters
// spread over clients clients.
func StepHandoff(waiters, clients int) string {
	return fmt.Sprintf("handoff to %d waiter(s) in %d client(s)", waiters, clients)
}

// StepContended names the step that measures contended throughput with
// goroutines goroutines.
func StepContended(goroutines int) string {
	return fmt.Sprintf("contended, %d goroutines", goroutines)
}

// FailedStep returns why step failed in r, or "" when it did not (or did
// not run).
func (r Report) FailedStep(step string) string {
	for _, f := range r.Failed {
		if f.Step == step {
			return f.Error
		}
	}
	return ""
}

// Suite runs every measurement of the standard suite against t, telling
// progress what it is doing. A step that fails does not stop the others:
// it is listed in the report's Failed (and told to progress), and its
// error is among those the returned error joins; the report holds the
// figures of the steps that succeeded. When ctx ends, the steps left are
// not run and the error includes ctx.Err().
func Suite(ctx context.Context, t Target, s Sizes, progress func(string)) (Report, error) {
	r := Report{Backend: t.Name}
	var errs []error
	// run runs one step, named step, told to progress as what.
	run := func(step, what string, measure func() error) {
		if ctx.Err() != nil {
			return
		}
		progress(fmt.Sprintf("%s: %s", t.Name, what))
		if err := measure(); err != nil {
			r.Failed = append(r.Failed, StepError{Step: step, Error: err.Error()})
			errs = append(errs, fmt.Errorf("%s: %w", step, err))
			progress(fmt.Sprintf("%s: %s failed: %v", t.Name, step, err))
		}
	}
	run(StepUncontended, StepUncontended, func() error {
		u, err := MeasureUncontended(ctx, t, s.UncontendedRounds)
		if err == nil {
			r.Uncontended = u
		}
		return err
	})
	for _, c := range []struct{ waiters, clients int }{{1, 1}, {16, 1}, {16, 16}} {
		step := StepHandoff(c.waiters, c.clients)
		run(step, step, func() error {
			h, err := MeasureHandoff(ctx, t, c.waiters, c.clients, s.HandoffRounds)
			if err == nil {
				r.Handoff = append(r.Handoff, h)
			}
			return err
		})
	}
	for _, g := range []int{8, 64} {
		step := StepContended(g)
		run(step, step, func() error {
			c, err := MeasureContended(ctx, t, g, min(g, 8), s.ContendedFor)
			if err == nil {
				r.Contended = append(r.Contended, c)
			}
			return err
		})
	}
	if t.Poller != nil {
		run(StepPolled, StepPolled, func() error {
			c, err := MeasurePolledContended(ctx, t.Poller, 64, s.ContendedFor)
			if err == nil {
				r.Polled = &c
			}
			return err
		})
	}
	run(StepSemaphore, fmt.Sprintf("semaphore of %d permits", semaphorePermits), func() error {
		sem, err := MeasureSemaphore(ctx, t, s.UncontendedRounds, s.ContendedFor)
		if err == nil {
			r.Semaphore = &sem
		}
		return err
	})
	run(StepFailover, fmt.Sprintf("election failover, %d crashes", s.FailoverRounds), func() error {
		f, err := MeasureFailover(ctx, t, s.FailoverRounds, s.FailoverTTL)
		if err == nil {
			r.Failover = &f
		}
		return err
	})
	run(StepHeld, fmt.Sprintf("%d held locks", s.HeldLocks), func() error {
		h, err := MeasureManyHeld(ctx, t, s.HeldLocks, s.HeldTTL, s.HeldPeriods)
		if err == nil {
			r.Held = h
		}
		return err
	})
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	return r, errors.Join(errs...)
}
