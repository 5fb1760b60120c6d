package hazelcast

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hazelcast/hazelcast-go-client"
	"github.com/hazelcast/hazelcast-go-client/hzerrors"
)

// api is the part of the Hazelcast client the driver uses: the entry locks of
// the lock map, and a compare-and-set counter per key in the fencing map.
// Lock calls take a context bound to an owner (owner.bind); the fencing calls
// take any context. The driver's logic is written against this interface so
// that its bookkeeping can be unit-tested; the only implementation outside
// tests is hzAPI, over a real client.
type api interface {
	// tryLock is IMap.tryLock(key, wait, lease): it takes the lock for the
	// owner of ctx, or enters it once more when that owner holds it already
	// (Hazelcast locks are reentrant per owner), and sets its lease to lease
	// from now; it waits up to wait on the member for another owner to let
	// go, and reports false when none did.
	tryLock(ctx context.Context, key string, lease, wait time.Duration) (bool, error)
	// unlock leaves the lock once for the owner of ctx. It returns an error
	// satisfying errors.Is(err, errNotOwner) when that owner does not hold
	// the lock (it is free, or another owner's).
	unlock(ctx context.Context, key string) error
	// isLocked reports whether any owner holds the lock on key
	// (IMap.isLocked). It says nothing of which owner: no call of the client
	// protocol reads a map lock's owner or the time left on its lease.
	isLocked(ctx context.Context, key string) (bool, error)
	// fence reads the fencing counter of key; ok is false when it is absent.
	fence(ctx context.Context, key string) (v int64, ok bool, err error)
	// initFence stores v as key's counter if it has none, and reports
	// whether it did.
	initFence(ctx context.Context, key string, v int64) (bool, error)
	// advanceFence replaces key's counter old by v if it is still old, and
	// reports whether it did.
	advanceFence(ctx context.Context, key string, old, v int64) (bool, error)
}

// errNotOwner: the member refused an unlock because the caller's lock owner
// does not hold the lock (Java's IllegalMonitorStateException).
var errNotOwner = hzerrors.ErrIllegalMonitorState

// hzAPI is api over a Hazelcast client's two maps.
type hzAPI struct {
	locks  *hazelcast.Map
	fences *hazelcast.Map
}

func (h hzAPI) tryLock(ctx context.Context, key string, lease, wait time.Duration) (bool, error) {
	if wait > 0 {
		return h.locks.TryLockWithLeaseAndTimeout(ctx, key, lease, wait)
	}
	return h.locks.TryLockWithLease(ctx, key, lease)
}

func (h hzAPI) unlock(ctx context.Context, key string) error {
	return h.locks.Unlock(ctx, key)
}

func (h hzAPI) isLocked(ctx context.Context, key string) (bool, error) {
	return h.locks.IsLocked(ctx, key)
}

func (h hzAPI) fence(ctx context.Context, key string) (int64, bool, error) {
	v, err := h.fences.Get(ctx, key)
	if err != nil || v == nil {
		return 0, false, err
	}
	n, ok := v.(int64)
	if !ok {
		return 0, false, fmt.Errorf("hazelcast: fencing counter of %q in map %q holds a %T, not an int64 (was the map written by something else?)", key, h.fences.Name(), v)
	}
	return n, true, nil
}

func (h hzAPI) initFence(ctx context.Context, key string, v int64) (bool, error) {
	prev, err := h.fences.PutIfAbsent(ctx, key, v)
	return err == nil && prev == nil, err
}

func (h hzAPI) advanceFence(ctx context.Context, key string, old, v int64) (bool, error) {
	return h.fences.ReplaceIfSame(ctx, key, old, v)
}

// isNotOwner reports whether err is the member's refusal of an unlock by an
// owner that does not hold the lock.
func isNotOwner(err error) bool { return errors.Is(err, errNotOwner) }
