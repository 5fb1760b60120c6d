package conformance

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/drivers/memory"
)

// A forgetful AcquireAny: when its caller's context ends while the grant's
// reply is on its way, it returns ctx.Err() and does not give the grant
// back (requirement 2 asks it to release every request's ID). The Mutex
// contests never call AcquireAny; SemaphoreAppliedAfterTimeout must catch
// it, and pass the same driver when it gives the grant back.
func TestSuiteCatchesForgetfulAnyAcquirer(t *testing.T) {
	t.Parallel()
	expectCaught(t, brokenHarness(forgetfulAnyAcquire), brokenHarness(givingBackAnyAcquire), "SemaphoreAppliedAfterTimeout")
}

// pooledDriver models a backend whose locks live as long as the
// connection that took them (PostgreSQL's advisory locks), over a pool of
// connections that the driver keeps open and busy for as long as it lives.
// A lease handed out to the core lapses within its TTL unless renewed, as
// a sound driver's does (it holds its connection apart, and the server
// ends a connection left idle for a TTL). A grant the driver forgets
// instead stays on a pooled connection, which other requests keep alive:
// here, a keep-alive renews it until the driver closes.
type pooledDriver struct {
	*plainDriver
	// giveBack says what AcquireAny does with a grant whose caller gave up
	// while its reply was on the way: release it (sound), or forget it.
	giveBack bool
	mu       sync.Mutex // orders keepOnPool's starts before Close's wait
	closed   chan struct{}
	isClosed bool
	wg       sync.WaitGroup
}

func forgetfulAnyAcquire(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	return &pooledDriver{plainDriver: d, closed: make(chan struct{})}
}

// givingBackAnyAcquire is forgetfulAnyAcquire's control.
func givingBackAnyAcquire(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	return &pooledDriver{plainDriver: d, giveBack: true, closed: make(chan struct{})}
}

func (d *pooledDriver) Capabilities() driver.Capabilities {
	return driver.Capabilities{AnyAcquirer: d}
}

// AcquireAny tries the locks in turn, in one request to the backend, and
// takes a millisecond to bring the reply back.
func (d *pooledDriver) AcquireAny(ctx context.Context, reqs []driver.Request) (driver.Lease, int, error) {
	l, i, err := acquireInTurn(ctx, d.plainDriver, reqs)
	if err != nil {
		return nil, 0, err
	}
	select {
	case <-time.After(time.Millisecond): // the reply's way back
		return l, i, nil
	case <-ctx.Done():
		if d.giveBack {
			_ = l.Release(context.WithoutCancel(ctx))
		} else {
			d.keepOnPool(l, reqs[i].TTL)
		}
		return nil, 0, ctx.Err()
	}
}

// keepOnPool leaves l on a pooled connection: it stays taken, by nobody,
// until the driver closes.
func (d *pooledDriver) keepOnPool(l driver.Lease, ttl time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.isClosed {
		return // the pool is gone, and the lock with it
	}
	d.wg.Go(func() {
		tick := time.NewTicker(ttl / 3)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				_ = l.Extend(context.Background(), ttl)
			case <-d.closed:
				return
			}
		}
	})
}

func (d *pooledDriver) Close() error {
	d.mu.Lock()
	if !d.isClosed {
		d.isClosed = true
		close(d.closed)
	}
	d.mu.Unlock()
	d.wg.Wait()
	return d.plainDriver.Close()
}
