package conformance

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/drivers/memory"
)

// An outage that a driver hides: during a restart every call is refused, as
// a server that is down refuses connections, and the broken driver reports
// it as a plain string, losing the connection error a waiting Lock is meant
// to ride out. The core then gives up on the first refusal. Over the memory
// backend, the harness's Restart refuses every call until at least one has
// been refused (so the outage is seen, however the machine schedules the
// waiter), then restarts the backend.

// outage refuses every call of the drivers it wraps while it is on.
type outage struct {
	mu      sync.Mutex
	down    bool
	refused chan struct{} // closed at the first refusal of the current outage
}

// errRefused is what a call gets during an outage: a refused connection,
// as the network library reports it.
var errRefused = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}

// check returns errRefused during an outage, and notes the refusal.
func (o *outage) check() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.down {
		return nil
	}
	select {
	case <-o.refused:
	default:
		close(o.refused)
	}
	return errRefused
}

// restart refuses calls until one was refused (or ctx ends), restarts b and
// serves again.
func (o *outage) restart(ctx context.Context, b *memory.Backend) error {
	o.mu.Lock()
	o.down, o.refused = true, make(chan struct{})
	refused := o.refused
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		o.down = false
		o.mu.Unlock()
	}()
	select {
	case <-refused:
	case <-ctx.Done():
		return ctx.Err()
	}
	b.Restart()
	return nil
}

// outageHarness makes plain clients of one backend whose calls, during the
// Restart hook's outage, fail with report(errRefused); Pause and Resume
// pause the backend.
func outageHarness(report func(error) error) Harness {
	h := brokenHarness(unbroken)
	b := memory.NewBackend()
	o := &outage{}
	h.NewDriver = func(context.Context) (driver.Driver, error) {
		d := &plainDriver{Driver: memory.New(b), b: b}
		d.acquire = func(ctx context.Context, d *plainDriver, req driver.Request) (driver.Lease, error) {
			if err := o.check(); err != nil {
				return nil, report(err)
			}
			return d.Driver.Acquire(ctx, req)
		}
		return d, nil
	}
	h.Faults = &Faults{
		Restart: func(ctx context.Context) error { return o.restart(ctx, b) },
		Pause:   func(context.Context) error { b.Pause(); return nil },
		Resume:  func(context.Context) error { b.Resume(); return nil },
	}
	return h
}

// TestSuiteCatchesHiddenOutage: LockWaitsThroughRestart fails a driver that
// reports a refused connection as a plain string, and passes the same driver
// when it passes the error on as it is.
func TestSuiteCatchesHiddenOutage(t *testing.T) {
	flattened := func(err error) error { return errors.New("backend unavailable: " + err.Error()) }
	passedOn := func(err error) error { return err }
	expectCaught(t, outageHarness(flattened), outageHarness(passedOn), "LockWaitsThroughRestart")
}
