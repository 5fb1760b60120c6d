package hazelcast

import (
	"context"

	"github.com/dlock-go/dlock/driver"
)

// Inspection. A member keeps a map lock's owner (the holding client's UUID
// and lock ID) and the time left on its lease to itself: the only read of a
// lock in the client protocol is IMap.isLocked, whether anyone holds it. The
// fencing token is in another map, advanced by the holder one round trip
// after its grant. So an inspection is made of separate reads, and reports
// what they can tell exactly: whether the lock is held, and the latest token
// issued at that moment. It cannot tell whose hold it saw, which is why the
// driver declares no Values (see "Inspection" in the package documentation).

// maxInspectTries bounds Inspect's reads of a counter that keeps changing
// under them: each change is a grant, so a few tries find a quiet moment
// unless the lock changes hands every round trip.
const maxInspectTries = 4

// Inspect describes the lock on key from three reads: the fencing counter,
// whether the lock is held, and the counter again. When the two counter
// reads agree, the counter held that value when the lock was found held or
// free, and Info.Token is it: the latest token issued at that moment, which
// is the holder's once its grant is settled, and the previous holder's
// between a grant and its settling (one round trip; see Driver.Acquire).
// When the counter changed under every try, Token is 0 (unknown).
//
// Held is true whoever holds the lock: a dlock lease, a grant being settled
// or given back, or an owner outside dlock locking the same map. Owner and
// Value are always empty, TTL always zero (unknown), and Waiters -1: the
// member tells none of them. Inspect takes no lock and changes nothing; its
// reads end with ctx. While the client is disconnected, it fails at once.
func (d *Driver) Inspect(ctx context.Context, key string) (driver.Info, error) {
	if err := d.enter(ctx); err != nil {
		return driver.Info{}, err
	}
	if !d.session.connectedNow() {
		return driver.Info{}, d.callErr(ctx, errNotConnected)
	}
	k := mapKey(key)
	info := driver.Info{Waiters: -1}
	before := d.readFence(ctx, k)
	for range maxInspectTries {
		if before.err != nil {
			return driver.Info{}, d.callErr(ctx, before.err)
		}
		held, err := d.api.isLocked(ctx, k)
		if err != nil {
			return driver.Info{}, d.callErr(ctx, err)
		}
		after := d.readFence(ctx, k)
		if after.err != nil {
			return driver.Info{}, d.callErr(ctx, after.err)
		}
		info.Held, info.Holders, info.Token = held, 0, 0
		if held {
			info.Holders = 1 // map locks are exclusive: Mode stays so
		}
		if after == before {
			if after.ok {
				info.Token = uint64(after.v)
			}
			return info, nil
		}
		// A grant advanced the counter meanwhile: the lock may have
		// changed hands around the read of it. Read again, from here.
		before = after
	}
	return info, nil
}
