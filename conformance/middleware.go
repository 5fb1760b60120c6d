package conformance

import (
	"context"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// Fault middleware: driver wrappers that the suite puts between the core and
// any driver, so that some faults (a slow reply, a renewal that never gets
// through) can be injected on every backend without harness hooks. They keep
// only the plain Driver and Lease methods, which is all the cases need.

// slowReplies delays every acquisition's reply by delay after the backend
// granted it, as a slow network would.
func slowReplies(delay time.Duration) func(driver.Driver) driver.Driver {
	return func(d driver.Driver) driver.Driver { return &slowDriver{Driver: d, delay: delay} }
}

type slowDriver struct {
	driver.Driver
	delay time.Duration
}

func (d *slowDriver) TryAcquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	l, err := d.Driver.TryAcquire(ctx, req)
	time.Sleep(d.delay) // the reply is on its way
	return l, err
}

// blockedRenewals makes every Extend hang until its context ends, as when the
// holder's link to the backend is cut while the lock stays on the backend.
func blockedRenewals(d driver.Driver) driver.Driver { return &blockingDriver{Driver: d} }

type blockingDriver struct{ driver.Driver }

func (d *blockingDriver) TryAcquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	l, err := d.Driver.TryAcquire(ctx, req)
	if err != nil {
		return nil, err
	}
	return &blockingLease{l}, nil
}

type blockingLease struct{ driver.Lease }

func (l *blockingLease) Extend(ctx context.Context, _ time.Duration) error {
	<-ctx.Done()
	return ctx.Err()
}
