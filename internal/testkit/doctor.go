package testkit

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/dlock-go/dlock/doctor"
)

// Diagnose runs the doctor on rawURL, for locks of ttl (0: dlock's
// default), and fails tb when it cannot.
func Diagnose(tb testing.TB, rawURL string, ttl time.Duration) *doctor.Report {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := doctor.Run(ctx, rawURL, doctor.Options{TTL: ttl})
	if err != nil {
		tb.Fatalf("doctor.Run: %v", err)
	}
	for _, f := range r.Findings {
		tb.Logf("HAZARD %s: %s. Why: %s. Fix: %s.", f.Check, f.Hazard, f.Why, f.Fix)
	}
	for _, s := range r.Skipped {
		tb.Logf("SKIPPED %s: %s", s.Check, s.Reason)
	}
	for _, f := range r.Facts {
		tb.Logf("%s: %s", f.Name, f.Value)
	}
	return r
}

// ExpectFindings fails tb unless r's findings are of exactly the checks
// named (none: a clean report), each of which ran, and nothing was
// skipped.
func ExpectFindings(tb testing.TB, r *doctor.Report, checks ...string) {
	tb.Helper()
	var got []string
	for _, f := range r.Findings {
		if f.Hazard == "" || f.Why == "" || f.Fix == "" {
			tb.Errorf("finding %s has an empty field: %+v", f.Check, f)
		}
		if !slices.Contains(got, f.Check) {
			got = append(got, f.Check)
		}
	}
	slices.Sort(got)
	want := slices.Clone(checks)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		tb.Errorf("doctor found %v, want %v", got, want)
	}
	for _, c := range checks {
		if !slices.Contains(r.Checks, c) {
			tb.Errorf("check %s is not among those that ran: %v", c, r.Checks)
		}
	}
	if len(r.Skipped) > 0 {
		tb.Errorf("checks skipped: %+v", r.Skipped)
	}
}
