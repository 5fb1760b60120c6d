package hazelcast

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/leasekit"
)

// Hold counting. A map lock is reentrant: its owner may lock it again, and
// the lock is free once the owner has unlocked it as many times as it locked
// it. Each re-entry also sets the lease again, to the lease time it carries,
// from now: that is how a lease is extended, since Hazelcast has no call that
// extends a lease in place. But a tryLock by an owner whose lock has lapsed
// (its lease ran out, or an operator force-unlocked it) does not fail when
// nobody took the lock meanwhile: it grants the lock afresh, with a count of
// one. A re-entry and a fresh grant answer alike, so an Extend made of a
// tryLock alone would resurrect lapsed locks, and never tell a holder that
// its lock had been taken from it and given back by expiry.
//
// So a lease holds its lock twice (baseHolds). Only an unlock tells a holder
// from a non-holder, and it must not free a lock the lease still holds; with
// two holds, Extend can probe with unlocks and keep the lock throughout:
//
//	tryLock(lease)    held: 2 -> 3, lease reset    lapsed: a fresh grant, 1
//	unlock, unlock    held: 3 -> 1                 lapsed: 1 -> 0, the second is refused
//	tryLock(lease)    held: 1 -> 2, lease reset
//
// A lapsed lock is thus found and left free, as it was; a lock another owner
// holds refuses the first tryLock. The lease, set again by the first step, can
// only run out between the steps if they take longer than it surely lasts,
// which Extend checks (a slower Extend is reported as a loss). Release unlocks
// twice; Acquire locks twice, the second time at once after the grant.
//
// The driver never abandons a call whose outcome matters: each runs in a
// context of its own, bounded by the TTL (callContext), and the caller's
// context is looked at between calls. When a call does fail or time out
// without an answer, its outcome is unknown, and so is the count: the lease
// is marked unsure. An unsure lease refuses Extend with ErrNotHeld (the core
// then reports it lost), and its Release unlocks until the member refuses.

// baseHolds is how many times a lease holds its lock.
const baseHolds = 2

// lease is a lock held by one owner through the driver.
type lease struct {
	// Grant holds the fencing token of the grant (see "Guarantees" in the
	// package documentation), and the validity: how long the lock is sure
	// to be held from the start of the latest Extend (the TTL less a
	// second: see leaseGranularity), or from the start of the acquisition
	// (the same, plus the time Acquire waited before the wait that was
	// granted began).
	leasekit.Grant
	d     *Driver
	key   string // the map key
	owner *owner
	// lost is the connection epoch the grant was asked for in (see
	// session.go): it ends, with the reason as its cause, when the lease
	// must be taken as lost.
	lost context.Context

	lossMu   sync.Mutex
	onLoss   func(error) // the core's (OnLoss); nil once told, and after Release
	stopLoss func() bool // stops the watch of lost that OnLoss started
	released bool        // Release has begun: OnLoss registers nothing more

	mu     sync.Mutex // serialises Extend and Release: each is several calls
	holds  int        // times the lease holds the lock, as far as the driver knows
	unsure bool       // a call's outcome is unknown, and with it holds
	ttl    time.Duration
}

var _ driver.Lease = (*lease)(nil)

// OnLoss registers f, called once, with the reason, when the client loses
// its connection to the cluster, connects to another cluster, shuts down,
// or the driver closes (see session.go): at once when that already
// happened. The epoch is watched with context.AfterFunc, which Release
// stops: once Release has returned, f is never called.
func (l *lease) OnLoss(f func(reason error)) {
	l.lossMu.Lock()
	defer l.lossMu.Unlock()
	if l.released || l.onLoss != nil || l.stopLoss != nil {
		return // after Release, or registered already
	}
	if l.lost.Err() != nil {
		f(context.Cause(l.lost))
		return
	}
	l.onLoss = f
	l.stopLoss = context.AfterFunc(l.lost, l.tellLoss)
}

// tellLoss calls the core's OnLoss callback, unless Release came first.
func (l *lease) tellLoss() {
	l.lossMu.Lock()
	defer l.lossMu.Unlock()
	if f := l.onLoss; f != nil {
		l.onLoss = nil
		f(context.Cause(l.lost))
	}
}

// forgetLoss stops the watch OnLoss started and forgets the callback: from
// its return on, it is never called.
func (l *lease) forgetLoss() {
	l.lossMu.Lock()
	defer l.lossMu.Unlock()
	l.released, l.onLoss = true, nil
	if l.stopLoss != nil {
		l.stopLoss()
	}
}

// Uncertain returns nil: the driver reports a disconnection as a loss
// (OnLoss), not as an uncertainty.
func (l *lease) Uncertain() error { return nil }

// Extend renews the lock for ttl from now, owner-checked: see "Hold counting"
// above. It returns driver.ErrNotHeld, changing nothing, when the lock lapsed
// or another owner holds it.
func (l *lease) Extend(ctx context.Context, ttl time.Duration) error {
	if err := l.d.enter(ctx); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.holds == 0 && !l.unsure:
		return driver.ErrNotHeld
	case l.unsure:
		return fmt.Errorf("%w: an earlier call on this lock went unanswered, so whether the lease still holds it is unknown", driver.ErrNotHeld)
	case l.lost.Err() != nil:
		// The client was cut off since the grant: see session.go.
		return fmt.Errorf("%w: %w", driver.ErrNotHeld, context.Cause(l.lost))
	}
	l.ttl = ttl
	lease := leaseTime(ttl)
	call, cancel := l.d.callContext(lease)
	defer cancel()
	lc, release := l.owner.bind(call)
	defer release()
	started := l.d.now()

	// Enter once more: this resets the lease, or finds another owner.
	ok, err := l.d.api.tryLock(lc, l.key, lease, 0)
	if err != nil {
		l.unsure = true
		return l.d.callErr(ctx, err)
	}
	if !ok {
		l.holds = 0
		return driver.ErrNotHeld
	}
	// Leave twice: a lapsed lock, granted afresh by the first step, refuses
	// the second unlock and is free again.
	done, refused, err := l.d.unlockTimes(lc, l.key, 2)
	switch {
	case err != nil:
		l.unsure = true
		return l.d.callErr(ctx, err)
	case refused:
		// done is 1 (the fresh grant undone) or 0 (someone force-unlocked
		// the lock between the calls): either way it is not ours.
		l.holds = 0
		return driver.ErrNotHeld
	case done != 2:
		l.unsure = true
		return fmt.Errorf("hazelcast: extend: %d of 2 unlocks went through", done)
	}
	// Back to two holds, with the lease reset once more.
	ok, err = l.d.api.tryLock(lc, l.key, lease, 0)
	switch {
	case err != nil:
		l.unsure = true
		return l.d.callErr(ctx, err)
	case !ok:
		// Only a force-unlock between the calls lets another owner in.
		l.holds = 0
		return driver.ErrNotHeld
	}
	if !l.d.within(started, lease) {
		// The lease set by the first step may have run out before the last
		// one, which then granted the lock afresh: the count is unknown.
		l.unsure = true
		return fmt.Errorf("%w: the renewal took %v, longer than the lease surely lasts, so the lock may have lapsed during it", driver.ErrNotHeld, l.d.now().Sub(started).Round(time.Millisecond))
	}
	l.holds = baseHolds
	l.SetValidity(validFor(ttl))
	return nil
}

// Release gives the lock up, owner-checked: it returns driver.ErrNotHeld,
// changing nothing, when the lock lapsed or another owner holds it. Whatever
// it returns, the loss callback is never called afterwards.
func (l *lease) Release(ctx context.Context) error {
	defer l.forgetLoss()
	if err := l.d.enter(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holds == 0 && !l.unsure {
		return driver.ErrNotHeld
	}
	if !l.d.session.connectedNow() {
		// The call would wait for a reconnection; the cluster releases the
		// locks of a disconnected client itself, and the lease ends anyway.
		return l.d.callErr(ctx, errNotConnected)
	}
	call, cancel := l.d.callContext(leaseTime(l.ttl))
	defer cancel()
	lc, release := l.owner.bind(call)
	defer release()

	if !l.unsure {
		done, _, err := l.d.unlockTimes(lc, l.key, l.holds)
		switch {
		case err != nil:
			l.unsure = true
			return l.d.callErr(ctx, err)
		case done == 0:
			l.holds = 0
			return driver.ErrNotHeld
		}
		// Fewer unlocks than holds went through only if the lock had
		// lapsed and been granted afresh to this owner: it is free now.
		l.holds = 0
		return nil
	}
	// The count is unknown: leave until the member says this owner no
	// longer holds the lock.
	released, err := l.d.unlockAll(lc, l.key)
	if err != nil {
		return l.d.callErr(ctx, err)
	}
	l.holds, l.unsure = 0, false
	if !released {
		return driver.ErrNotHeld
	}
	return nil
}
