package hazelcast

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// Fencing. Hazelcast's open-source map locks issue no fencing token, and the
// FencedLock of the CP Subsystem is neither in the Go client's API nor, since
// Hazelcast 5.5, in the open-source member. So the driver keeps a counter per
// key in a second map (the fencing map) and advances it with compare-and-set
// each time it grants the lock, while the lock is held: the new value is the
// greater of the counter plus one and the time on this process's clock in
// microseconds since 1970. Compare-and-set makes every value issued unique
// and greater than the one before, even when a holder whose lease ran out is
// still advancing the counter beside the new holder (that holder's grant is
// then refused by the core, since it arrives after its validity). The clock
// keeps tokens rising when the counter is lost (a cluster restarted without
// persistence, an evicted or deleted entry), provided the clocks of the
// clients taking the lock afterwards are not behind the last token issued.

// maxFenceTries bounds the compare-and-set loop. Only a holder whose lease
// ran out competes with the current holder for the counter, so a few tries
// are plenty; more means something else writes the fencing map.
const maxFenceTries = 16

// errFenceContended: the counter kept changing under the compare-and-set.
var errFenceContended = errors.New("hazelcast: the fencing counter changed under every compare-and-set; is something else writing the fencing map?")

// fenceRead is a read of a fencing counter made before the lock was granted,
// beside the request for it, to save a round trip when nothing changed the
// counter meanwhile (the compare-and-set tells).
type fenceRead struct {
	v   int64
	ok  bool
	err error
}

// readFence reads key's fencing counter.
func (d *Driver) readFence(ctx context.Context, key string) fenceRead {
	v, ok, err := d.api.fence(ctx, key)
	return fenceRead{v, ok, err}
}

// nextToken advances key's fencing counter and returns its new value. The
// caller holds the lock on key. early, when not nil, is a read made before
// the grant, used for the first compare-and-set.
func (d *Driver) nextToken(ctx context.Context, key string, early *fenceRead) (uint64, error) {
	for i := range maxFenceTries {
		var r fenceRead
		if i == 0 && early != nil && early.err == nil {
			r = *early
		} else if r = d.readFence(ctx, key); r.err != nil {
			return 0, r.err
		}
		cur, ok := r.v, r.ok
		next := d.now().UnixMicro()
		if ok && cur >= next {
			if cur == math.MaxInt64 {
				return 0, fmt.Errorf("hazelcast: the fencing counter of %q is at its maximum", key)
			}
			next = cur + 1
		}
		var stored bool
		var err error
		if ok {
			stored, err = d.api.advanceFence(ctx, key, cur, next)
		} else {
			stored, err = d.api.initFence(ctx, key, next)
		}
		if err != nil {
			return 0, err
		}
		if stored {
			return uint64(next), nil
		}
	}
	return 0, errFenceContended
}
