package conformance

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/drivers/memory"
)

// Deliberately broken AnyAcquirers, each a known way to get "take any free
// permit in one request" wrong: the AnyAcquire case must catch each, and
// pass an AnyAcquirer that simply tries the locks in turn.
func TestSuiteCatchesBrokenAnyAcquirers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		broken   func(*memory.Backend, *plainDriver, int64) driver.Driver
		caughtBy []string
	}{
		{"every free permit taken", takeEveryFree, []string{"AnyAcquire"}},
		{"a count kept apart from the permits' locks", countApart, []string{"AnyAcquire"}},
		{"a token sequence of its own", tokensOfItsOwn, []string{"AnyAcquire", "SemaphoreBound"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			expectCaught(t, brokenHarness(tc.broken), brokenHarness(unbrokenAnyAcquire), tc.caughtBy...)
		})
	}
}

// anyAcquiringDriver adds an AnyAcquirer to a plainDriver: one that tries
// the locks in turn, or a broken replacement.
type anyAcquiringDriver struct {
	*plainDriver
	acquireAny func(ctx context.Context, d *plainDriver, reqs []driver.Request) (driver.Lease, int, error)
}

func (d anyAcquiringDriver) Capabilities() driver.Capabilities {
	return driver.Capabilities{AnyAcquirer: d}
}

func (d anyAcquiringDriver) AcquireAny(ctx context.Context, reqs []driver.Request) (driver.Lease, int, error) {
	if d.acquireAny != nil {
		return d.acquireAny(ctx, d.plainDriver, reqs)
	}
	return acquireInTurn(ctx, d.plainDriver, reqs)
}

// acquireInTurn is a sound AnyAcquirer in as many round trips as requests:
// Acquire of each in turn, up to the first grant.
func acquireInTurn(ctx context.Context, d *plainDriver, reqs []driver.Request) (driver.Lease, int, error) {
	var soonest time.Duration
	for i, req := range reqs {
		l, err := d.Acquire(ctx, req)
		if err == nil {
			return l, i, nil
		}
		if !errors.Is(err, driver.ErrLocked) {
			return nil, 0, err
		}
		if le, ok := errors.AsType[*driver.LockedError](err); ok && le.RetryAfter > 0 && (soonest == 0 || le.RetryAfter < soonest) {
			soonest = le.RetryAfter
		}
	}
	return nil, 0, &driver.LockedError{RetryAfter: soonest}
}

func unbrokenAnyAcquire(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	return anyAcquiringDriver{plainDriver: d}
}

// A script that takes every free permit and returns the first: the others
// stay taken, by nobody, until their TTL ends.
func takeEveryFree(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	return anyAcquiringDriver{plainDriver: d, acquireAny: func(ctx context.Context, d *plainDriver, reqs []driver.Request) (driver.Lease, int, error) {
		var first driver.Lease
		index := 0
		for i, req := range reqs {
			if l, err := d.Acquire(ctx, req); err == nil && first == nil {
				first, index = l, i
			}
		}
		if first == nil {
			return nil, 0, driver.ErrLocked
		}
		return first, index, nil
	}}
}

// A semaphore counted natively, in a structure of its own beside the
// permits' locks: its holders and the holders of the permits' locks (a
// client that takes permits one lock at a time, a Mutex on a permit's key)
// do not see each other.
func countApart(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	return anyAcquiringDriver{plainDriver: d, acquireAny: func(ctx context.Context, d *plainDriver, reqs []driver.Request) (driver.Lease, int, error) {
		counted := make([]driver.Request, len(reqs))
		for i, req := range reqs {
			req.Key = "counted/" + req.Key
			counted[i] = req
		}
		return acquireInTurn(ctx, d, counted)
	}}
}

// Grants numbered by a counter of the AnyAcquirer's own, not the key's
// fencing sequence: a permit's token falls back below those that plain
// grants of the key issued, and two clients issue the same tokens.
func tokensOfItsOwn(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	var issued atomic.Uint64
	return anyAcquiringDriver{plainDriver: d, acquireAny: func(ctx context.Context, d *plainDriver, reqs []driver.Request) (driver.Lease, int, error) {
		l, i, err := acquireInTurn(ctx, d, reqs)
		if err != nil {
			return nil, 0, err
		}
		return &ownToken{Lease: l, token: issued.Add(1)}, i, nil
	}}
}

type ownToken struct {
	driver.Lease
	token uint64
}

func (l *ownToken) Token() uint64 { return l.token }
