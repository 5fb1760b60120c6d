package testkit

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// ElectionRoundTrip runs a leader election of key over two clients of one
// backend, as a driver's own quick check that it stores values
// (driver.Capabilities.Values): c1 campaigns as "node-1", c2's Leader must
// report exactly that value with the leadership's Lease.Token as the term;
// then c2 campaigns as "node-2" while c1 leads, c1 resigns, and an observer
// on c2 must have seen the two leaders in that order, each with its own
// term (a vacancy between them may or may not be seen). Every wait is
// bounded by ctx (the second Campaign by a minute as well); nothing
// waits on a clock for something to happen.
func ElectionRoundTrip(tb testing.TB, ctx context.Context, c1, c2 *dlock.Client, key string) {
	tb.Helper()
	e1, err := c1.Election(key)
	fatalIf(tb, err, "Election", key)
	e2, err := c2.Election(key)
	fatalIf(tb, err, "Election", key)

	obsCtx, stop := context.WithCancel(ctx)
	defer stop()
	obs, err := e2.Observe(obsCtx)
	fatalIf(tb, err, "Observe", key)
	// next returns the next leader Observe reports, skipping vacancies.
	next := func() dlock.Leadership {
		tb.Helper()
		for {
			select {
			case l, ok := <-obs:
				if !ok {
					tb.Fatalf("Observe(%q) closed its channel early", key)
				}
				if l != (dlock.Leadership{}) {
					return l
				}
			case <-ctx.Done():
				tb.Fatalf("Observe(%q): no leader reported: %v", key, ctx.Err())
			}
		}
	}

	l1, err := e1.Campaign(ctx, "node-1")
	fatalIf(tb, err, "Campaign", key)
	want1 := dlock.Leadership{Value: "node-1", Term: l1.Token()}
	if got, err := e2.Leader(ctx); err != nil || got != want1 {
		tb.Fatalf("Leader(%q) on the other client = %+v, %v; want %+v", key, got, err, want1)
	}
	if got := next(); got != want1 {
		tb.Fatalf("Observe(%q) first leader %+v, want %+v", key, got, want1)
	}

	won := Go(func() (dlock.Lease, error) { return e2.Campaign(ctx, "node-2") })
	if err := e1.Resign(ctx); err != nil {
		tb.Fatalf("Resign(%q): %v", key, err)
	}
	got := next()
	l2 := won.Within(tb, time.Minute, "the second Campaign")
	want2 := dlock.Leadership{Value: "node-2", Term: l2.Token()}
	if got != want2 || want2.Term <= want1.Term {
		tb.Fatalf("Observe(%q) second leader %+v, want %+v (after term %d)", key, got, want2, want1.Term)
	}
	if got, err := e1.Leader(ctx); err != nil || got != want2 {
		tb.Fatalf("Leader(%q) after the handover = %+v, %v; want %+v", key, got, err, want2)
	}
	if err := e2.Resign(ctx); err != nil {
		tb.Fatalf("Resign(%q): %v", key, err)
	}
}
