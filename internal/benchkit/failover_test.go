package benchkit

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/drivers/memory"
)

// TestFailover crashes leaders on the in-process backend, whose holds last
// until they expire: each crash is timed, and no follower led before the
// crashed leader's hold could have expired. The leader renews every third
// of the TTL, so its hold lasts at least two thirds of the TTL after the
// crash; a third is the bound checked, leaving a renewal late by a third
// of the TTL (500 ms here) room on a loaded machine.
func TestFailover(t *testing.T) {
	b := memory.NewBackend()
	target := Target{
		Name: "memory",
		NewClient: func(_ context.Context, opts ...dlock.Option) (*dlock.Client, error) {
			return dlock.New(memory.New(b), opts...)
		},
	}
	const ttl = 1500 * time.Millisecond
	for range 2 {
		d, err := failoverRound(t.Context(), target, ttl)
		if err != nil {
			t.Fatal(err)
		}
		if d < ttl/3 {
			t.Errorf("a follower led %v after the crash: before the crashed leader's hold could have expired (a third of the TTL, %v)", d, ttl/3)
		}
	}
	f, err := MeasureFailover(t.Context(), target, 1, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if f.N != 1 || f.TTL != ttl || f.P50 <= 0 || f.P50 != f.P95 || f.P95 != f.Max {
		t.Errorf("Failover %+v: want 1 round on a TTL of %v, its time as p50, p95 and max", f, ttl)
	}
}
