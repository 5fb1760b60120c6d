package memcache

import (
	"context"
	"net/url"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"
	"go.uber.org/goleak"

	"github.com/dlock-go/dlock/conformance"
	"github.com/dlock-go/dlock/conformance/containerfaults"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// suiteTTL is the lease length of the conformance run. memcached expires in
// whole seconds and guarantees a TTL of N seconds for only N-2.1 s (see
// ttl.go), so the validity deadline comes at 8 s - 2.1 s - 82 ms (the core's
// margin) = 5.82 s, about 73% of the TTL. The suite needs more than 2/3 of
// the TTL: in RenewalBlocked the core's first renewal starts at TTL/3 and
// hangs for its TTL/3 limit, and the lease must be reported uncertain (at
// 5.33 s) before its deadline; 8 s leaves 0.48 s for a loaded machine (7 s
// would leave 0.16 s, 6 s none). ManualExtend (an Extend after TTL/2 without
// renewal) then has 1.8 s of room.
const suiteTTL = 8 * time.Second

// TestConformance runs the whole suite against the container, with the
// Tamper hook and, for a container, the fault hooks.
func TestConformance(t *testing.T) {
	defer goleak.VerifyNone(t, append(testserver.IgnoreOwnGoroutines(), goleak.IgnoreCurrent())...)
	mc := newMC(t)
	h := conformance.Harness{
		NewDriver: func(context.Context) (driver.Driver, error) {
			// A client per Driver, as separate processes would have,
			// with its selector, so that the suite renews in batches.
			server.Need(t)
			mc, sel := newMCSelAt(t, server.URL)
			return New(mc, WithSelector(sel))
		},
		TTL: suiteTTL,
		Tamper: func(_ context.Context, key string, overwrite bool) error {
			name := namesOf(DefaultKeyPrefix, key).lock
			if !overwrite {
				return mc.Delete(name)
			}
			stranger := encodeValue(holding{id: "stranger", expires: time.Now().Add(time.Hour)})
			return mc.Set(&gomemcache.Item{Key: name, Value: stranger, Expiration: int32(time.Hour / time.Second)})
		},
		// A client whose link to the server the partition cases cut.
		NewLinkedDriver: containerfaults.LinkedURL(testkit.URL(t, server.URL), func(_ context.Context, u *url.URL) (driver.Driver, error) {
			mc, sel := newMCSelAt(t, u.String())
			return New(mc, WithSelector(sel))
		}),
		Faults: server.FaultHooks(),
	}
	conformance.Run(t, h)
}
