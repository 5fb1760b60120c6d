package testserver

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock/conformance"
)

// Own starts servers of tb's own (a cluster, a group of masters) with
// start, which timeout bounds, and terminates them, within a minute, when
// tb ends. A failed start or termination fails tb.
func Own[S interface{ Terminate(context.Context) error }](tb testing.TB, timeout time.Duration, start func(context.Context) (S, error)) S {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	s, err := start(ctx)
	if err != nil {
		tb.Fatalf("start the test's own servers: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.Terminate(ctx); err != nil {
			tb.Errorf("terminate the test's own servers: %v", err)
		}
	})
	return s
}

// eachServer runs f on every server of servers (nil ones left out) at once
// and joins the errors.
func eachServer(ctx context.Context, servers []*Server, f func(*Server, context.Context) error) error {
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		if s != nil {
			wg.Go(func() { errs[i] = f(s, ctx) })
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// eachFaults returns the fault hooks of a backend made of several servers,
// each of which each applies a function to: Pause and Resume act on every
// server at once, and Restart stops them all, then starts them all.
func eachFaults(each func(context.Context, func(*Server, context.Context) error) error) *conformance.Faults {
	return &conformance.Faults{
		Pause:  func(ctx context.Context) error { return each(ctx, (*Server).Pause) },
		Resume: func(ctx context.Context) error { return each(ctx, (*Server).Resume) },
		Restart: func(ctx context.Context) error {
			if err := each(ctx, (*Server).Stop); err != nil {
				return err
			}
			return each(ctx, (*Server).Start)
		},
	}
}
