package hazelcast

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// minCallTime is the least time a call is given before the driver stops
// waiting for its answer: short TTLs must not turn a slow moment of a loaded
// machine into an unknown outcome.
const minCallTime = time.Second

// callContext returns the context of calls whose outcome the driver must
// learn: it is not the caller's, so that a caller who gives up does not leave
// a lock or a hold count behind unknown, and it is bounded by bound (at least
// minCallTime), past which the answer no longer matters because the lease it
// concerns has run out. It ends when the driver closes.
func (d *Driver) callContext(bound time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(d.closing, max(bound, minCallTime))
}

// errNoAnswer: a call got no answer within its bound, so its outcome is
// unknown. It does not wrap context.DeadlineExceeded, which would read as
// the caller's own deadline.
var errNoAnswer = errors.New("hazelcast: no answer from the cluster in time; the call's outcome is unknown")

// callErr is what an operation returns for a call that failed with err:
// driver.ErrClosed when the driver closed meanwhile, the caller's context
// error when that ended (so the core returns exactly ctx.Err()), and err
// otherwise, unwrapped but marked when it is transient (transient.go), for
// the core to wrap once.
func (d *Driver) callErr(ctx context.Context, err error) error {
	switch {
	case d.closed.Load():
		return driver.ErrClosed
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		err = fmt.Errorf("%w (%v)", errNoAnswer, err)
	}
	return markTransient(err)
}

// unlockTimes unlocks key n times for the owner of lc, the
// calls in flight together: their order does not matter. It returns how many
// went through, whether the member refused any because the owner did not
// hold the lock, and the first other error (whose call's outcome is unknown).
func (d *Driver) unlockTimes(lc context.Context, key string, n int) (done int, refused bool, err error) {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 1; i < n; i++ {
		wg.Go(func() { errs[i] = d.api.unlock(lc, key) })
	}
	errs[0] = d.api.unlock(lc, key)
	wg.Wait()
	return tally(errs)
}

func tally(errs []error) (done int, refused bool, err error) {
	for _, e := range errs {
		switch {
		case e == nil:
			done++
		case isNotOwner(e):
			refused = true
		case err == nil:
			err = e
		}
	}
	return done, refused, err
}

// maxHolds bounds unlockAll: no lease ever holds its lock more often.
const maxHolds = baseHolds + 2

// unlockAll unlocks key for the owner of lc until the member refuses because
// the owner no longer holds it, and reports whether any unlock went through.
// It is for counts the driver does not know: after a call without an answer.
func (d *Driver) unlockAll(lc context.Context, key string) (released bool, err error) {
	for range maxHolds {
		switch err := d.api.unlock(lc, key); {
		case err == nil:
			released = true
		case isNotOwner(err):
			return released, nil
		default:
			return released, err
		}
	}
	return released, nil
}

// abandon leaves whatever an acquisition by o may have left of key on the
// member: a grant whose answer was lost, or one the caller no longer wants.
// Errors are not reported: the lock's lease ends it anyway.
func (d *Driver) abandon(o *owner, key string, lease time.Duration) {
	call, cancel := d.callContext(lease)
	defer cancel()
	lc, release := o.bind(call)
	defer release()
	_, _ = d.unlockAll(lc, key)
}

// leaseTime is ttl rounded up to whole milliseconds, Hazelcast's lease unit,
// so that a lock is never held for less than asked.
func leaseTime(ttl time.Duration) time.Duration {
	return (ttl + time.Millisecond - 1).Truncate(time.Millisecond)
}

// leaseGranularity is how far from its lease's end a member may free a lock.
// Members do not free a lapsed lock at the millisecond: they schedule lease
// ends in groups of whole seconds (SecondsBasedEntryTaskScheduler), per map
// and partition. A group runs at the first of its entries' ends rounded up to
// a second, measured from when that entry was scheduled, so a lock whose
// lease ends in the same second as one scheduled earlier can be freed up to a
// second before its own end, and a lock can be freed up to two seconds after
// it.
const leaseGranularity = time.Second

// MinTTL is the shortest TTL the driver accepts: a lease can end up to a
// second early (see Guarantees in the package documentation), so a TTL of
// at least two leaves the core a validity of at least one.
const MinTTL = 2 * time.Second

// validFor is how long a lease of lease, set at some moment, is sure to
// hold the lock from that moment: the lease less the member's granularity.
func validFor(lease time.Duration) time.Duration {
	return lease - leaseGranularity
}

// margin is the part of a validity the driver does not count on when it
// checks that a sequence of calls finished within it: the core's own safety
// margin for clock drift between this process and the member (1% plus 2 ms).
func margin(d time.Duration) time.Duration {
	return d/100 + 2*time.Millisecond
}

// within reports whether calls that began at started (by d.now), the first
// of which set a lease of lease, all ended while that lease surely still held
// the lock.
func (d *Driver) within(started time.Time, lease time.Duration) bool {
	v := validFor(lease)
	return d.now().Sub(started) < v-margin(v)
}
