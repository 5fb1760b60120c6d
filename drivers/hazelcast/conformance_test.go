package hazelcast

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/hazelcast/hazelcast-go-client"

	"github.com/dlock-go/dlock/conformance"
	"github.com/dlock-go/dlock/conformance/containerfaults"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/internal/urlparams"
)

// conformanceTTL is the TTL of the conformance run: a member ends leases in
// whole seconds (see leaseGranularity), so the suite's 1 s default is below
// MinTTL, and a lease is valid for the TTL less a second. At 3 s (a validity
// of 2 s) the fault cases failed on the loaded 2-core machine (load average
// near 30): a docker pause and unpause around a pause of 0.3 TTL, then a
// renewal of four requests to a JVM thawing, took longer than the validity.
const conformanceTTL = 5 * time.Second

// TestConformance runs the shared suite against the real cluster, with its
// fault hooks when the cluster is this package's container. Every case but
// the reentrant and read-write ones applies.
func TestConformance(t *testing.T) {
	mapName := testMapName()
	u := memberURL(t, mapName)
	// With fault hooks, every client of the harness (the drivers, linked
	// ones included, and the stranger that tampers) reaches the member
	// through a front that refuses connections while the member restarts,
	// as the member's own host would, rather than through Docker's port
	// proxy, which accepts and closes them (see testserver.HazelcastFront).
	var front *testserver.HazelcastFront
	if server.Faults() {
		front = testserver.NewHazelcastFront(t, server.Server)
		u.Host = front.Addr()
	}
	stranger := rawClientOf(t, u)
	h := conformance.Harness{
		// After a restart the clients must be back within the suite's
		// bounds: a connection attempt that the member does not answer is
		// given up after 2 s rather than the client's default 5 s (what a
		// URL's connect_timeout=2s sets, but without bounding the first
		// connection by 2 s too, which a loaded machine could miss).
		NewDriver: func(ctx context.Context) (driver.Driver, error) {
			return urlparams.Parsed(parseURL, start)(ctx, u, 2*time.Second)
		},
		TTL:       conformanceTTL,
		ExpiryLag: 2 * time.Second, // members end leases in whole-second batches
		// Tampering is what an operator with a client would do to the
		// lock: force-unlock it, and perhaps take it for another owner.
		Tamper: func(ctx context.Context, key string, overwrite bool) error {
			m, err := stranger.GetMap(ctx, mapName)
			if err != nil {
				return err
			}
			if err := m.ForceUnlock(ctx, mapKey(key)); err != nil {
				return err
			}
			if !overwrite {
				return nil
			}
			ok, err := m.TryLockWithLease(hazelcast.NewLockContext(ctx), mapKey(key), time.Minute)
			if err == nil && !ok {
				err = errors.New("the stranger could not take the force-unlocked lock")
			}
			return err
		},
	}
	// A client whose one connection goes through a link of its own, which
	// the partition cases cut: unisocket, so that it dials only the
	// proxy's address and not the addresses the member advertises.
	h.NewLinkedDriver = containerfaults.LinkedURL(u, func(ctx context.Context, pu *url.URL) (driver.Driver, error) {
		q := pu.Query()
		q.Set(paramUnisocket, "true")
		pu.RawQuery = q.Encode()
		return open(ctx, pu)
	})
	if front != nil {
		h.Faults = server.FaultHooks()
		h.Faults.Restart = front.Restart
	}
	conformance.Run(t, h)
}
