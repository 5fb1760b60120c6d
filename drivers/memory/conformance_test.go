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
//
// Only the Blocking ones serve waiting clients in arrival order: their
// waiters queue in the backend, first come first served. The others wait
// outside it, woken by notifications or polling, and whichever client
// tries first after a release gets the lock.
func TestConformance(t *testing.T) {
	for name, tc := range map[string]struct {
		opts    []memory.Option
		ordered bool
	}{
		"Default":            {nil, true},
		"ContextLossReports": {[]memory.Option{memory.WithContextLossReports()}, true},
		"Notifications":      {[]memory.Option{memory.WithoutBlocking(), memory.WithoutLossReports()}, false},
		"TokenBlocks":        {[]memory.Option{memory.WithoutBlocking(), memory.WithTokenBlocks(8)}, false},
		"PollingOnly":        {[]memory.Option{memory.WithoutBlocking(), memory.WithoutNotifications(), memory.WithoutLossReports(), memory.WithoutAnyAcquirer()}, false},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := harness(tc.opts...)
			h.ClientsServedInOrder = tc.ordered
			conformance.Run(t, h)
		})
	}
}
