package memory_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock/conformance"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/drivers/memory"
)

// harness runs the suite on a fresh Backend, with every fault hook.
func harness(opts ...memory.Option) conformance.Harness {
	b := memory.NewBackend()
	return conformance.Harness{
		NewDriver: func(context.Context) (driver.Driver, error) { return memory.New(b, opts...), nil },
		// Renewal must come within about two thirds of the TTL: 1 s, as for
		// the server backends, leaves a renewal room for a loaded machine
		// running -race, where 250 ms lost leases to a scheduler stall.
		TTL: time.Second,
		Tamper: func(_ context.Context, key string, overwrite bool) error {
			b.Tamper(key, overwrite)
			return nil
		},
		Faults: &conformance.Faults{
			Pause:   func(context.Context) error { b.Pause(); return nil },
			Resume:  func(context.Context) error { b.Resume(); return nil },
			Restart: func(context.Context) error { b.Restart(); return nil },
		},
	}
}

// The suite runs once per way the core can wait, hand over and learn of
// losses: Default and ContextLossReports are Blocking (so without a
// Transferer or a TokenBlock); the others are not, and have a Transferer.
func TestConformance(t *testing.T) {
	for name, opts := range map[string][]memory.Option{
		"Default":            nil,
		"ContextLossReports": {memory.WithContextLossReports()},
		"Notifications":      {memory.WithoutBlocking(), memory.WithoutLossReports()},
		"TokenBlocks":        {memory.WithoutBlocking(), memory.WithTokenBlocks(8)},
		"PollingOnly":        {memory.WithoutBlocking(), memory.WithoutNotifications(), memory.WithoutLossReports(), memory.WithoutAnyAcquirer()},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			conformance.Run(t, harness(opts...))
		})
	}
}
