package testserver

import (
	"context"
	"testing"
	"time"
)

// StartForTest starts spec in a container of its own for one test (see
// [Start]) and terminates it when tb ends; a failure to start fails tb. It
// is for tests that need a server configured unlike the package's shared
// one (the doctor's planted hazards), so that no test depends on what
// another did to a container.
func StartForTest(tb testing.TB, spec Spec) *Server {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	s, err := Start(ctx, spec)
	if err != nil {
		tb.Fatalf("start %s: %v", spec.Name, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.Terminate(ctx); err != nil {
			tb.Error(err)
		}
	})
	return s
}
