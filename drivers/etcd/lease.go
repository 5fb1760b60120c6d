package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/deadline"
	"github.com/dlock-go/dlock/internal/leasekit"
)

// Reasons of a lease's end, as OnLoss reports them.
var (
	// errExpired: the lease was not extended within its TTL, so the driver
	// deleted its key, as a lease-key backend would have let it expire.
	errExpired = errors.New("etcd: the lock was not extended within its TTL; the driver deleted it")
	// errGone: the lock's key was deleted or overwritten behind the holder's
	// back (an operator, a tool, a buggy client).
	errGone = errors.New("etcd: the lock's key was deleted or replaced by someone else")
	// errReleased ends a lease released normally (and is reported to no
	// one).
	errReleased = errors.New("etcd: the lease was released")
)

// lease is one lock held on etcd. Its key lives under the Driver's session
// lease; for a reentrant hold, the shared hold key lives under the hold's own
// lease and the key is this request's member entry (see owner.go).
//
// Beside etcd's lease, the driver keeps a deadline of its own: when the core
// does not extend the lease within its TTL, the Driver's deadline queue
// deletes the key (revision-checked), so that a live process that stops
// renewing loses the lock after the TTL, as with any lease-key backend,
// rather than after its session lease, which the Driver keeps alive
// regardless.
//
// A held lease costs no timer and no context: the Driver keeps one queue of
// deadlines, and each keeper the set of leases to tell when its etcd lease
// is lost.
type lease struct {
	// Grant holds the fencing token, the create revision of the lock's key
	// in the queue (for a reentrant hold, of the hold's key; see
	// "Guarantees" in the package documentation), and the validity: how
	// long from the start of the latest acquire or extend the lock is sure
	// to be held, no longer than the TTL from the round trip that confirmed
	// it, and no longer than etcd keeps the session lease (the start of its
	// latest confirmed keepalive plus its TTL).
	leasekit.Grant
	d    *Driver
	key  string // the contender, or for a reentrant hold the member entry
	rev  int64  // key's create revision
	sess *keeper
	hold *holdRef // nil for plain locks

	mu     sync.Mutex
	ended  bool                   // released, expired, or found gone: nothing more to do
	reason error                  // why it ended, once ended
	onLoss func(error)            // the core's (OnLoss); nil once told, and after Release
	until  time.Time              // the driver's own deadline (start of the last confirmation + TTL)
	expiry deadline.Entry[*lease] // in the Driver's deadline queue, at until
	ttlNow time.Duration
}

var _ driver.Lease = (*lease)(nil)

// newLease makes the lease of a grant confirmed by a round trip that
// started at confirmed, for an acquisition call that started at started.
func (d *Driver) newLease(req driver.Request, key string, rev int64, token uint64, sess *keeper, hold *holdRef, started, confirmed time.Time) *lease {
	l := &lease{d: d, key: key, rev: rev, sess: sess, hold: hold, ttlNow: req.TTL}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.until = confirmed.Add(req.TTL)
	l.Start(token, l.promise(started))
	d.deadlines.Schedule(&l.expiry, l, l.until)
	for _, k := range l.keepers() {
		if err := k.register(l); err != nil {
			l.end(err) // lost between the grant and now
			break
		}
	}
	return l
}

// promise returns how long from started the lock is sure to be held: until
// the driver's own deadline and every etcd lease the lock lives under,
// whichever ends first. Callers hold l.mu.
func (l *lease) promise(started time.Time) time.Duration {
	end := l.until
	if e := l.sess.until(); e.Before(end) {
		end = e
	}
	if l.hold != nil {
		if e := l.hold.k.until(); e.Before(end) {
			end = e
		}
	}
	return end.Sub(started)
}

// OnLoss calls f when the lease is lost: with a reason wrapping
// ErrSessionLost when its etcd lease was lost, errExpired's when it was not
// extended in time, errGone's when its key was found deleted or replaced,
// driver.ErrClosed's when the Driver closed. At once, when it already was.
func (l *lease) OnLoss(f func(reason error)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case !l.ended:
		l.onLoss = f
	case l.reason != errReleased:
		f(l.reason)
	}
}

// Uncertain returns why the lock's state is unknown right now: a keepalive
// of its etcd lease failed, or the connection to etcd is down.
func (l *lease) Uncertain() error {
	l.mu.Lock()
	ended := l.ended
	l.mu.Unlock()
	if ended {
		return nil
	}
	if err := l.sess.uncertain(); err != nil {
		return err
	}
	if l.hold != nil {
		return l.hold.k.uncertain()
	}
	return nil
}

// end marks the lease ended with reason, and tells the core unless it was
// released. It reports false when it already was. Callers hold l.mu.
func (l *lease) end(reason error) bool {
	if l.ended {
		return false
	}
	l.ended, l.reason = true, reason
	l.d.deadlines.Remove(&l.expiry)
	for _, k := range l.keepers() {
		k.forget(l)
	}
	if f := l.onLoss; f != nil {
		l.onLoss = nil
		f(reason)
	}
	if l.hold != nil {
		l.d.unuseHold(l.hold.k)
	}
	return true
}

// lose ends the lease as lost, for reason: its etcd lease was.
func (l *lease) lose(reason error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.end(reason)
}

// Extend confirms that the lock is still this lease's, with one read-only
// transaction comparing the key's create and mod revisions with the grant's
// (so a key deleted, re-created or overwritten since is not taken for ours),
// and that its etcd leases are alive (a keepalive confirmed no earlier than
// a third of their TTL ago, sending one if needed). It then moves the
// driver's own deadline to ttl from the start of the call. A failure to
// reach etcd (ctx ending included) is returned as it is and ends nothing:
// the core retries, and the lease stays until its deadline.
func (l *lease) Extend(ctx context.Context, ttl time.Duration) error {
	if err := l.d.enter(ctx); err != nil {
		return err
	}
	if err := l.extendable(); err != nil {
		return err
	}
	started := time.Now()
	if err := confirmAll(ctx, l.d, l.keepers()); err != nil {
		return l.keeperFailed(ctx, err)
	}
	resp, err := l.d.cli.Txn(ctx).If(l.ours()...).Commit()
	if err != nil {
		return l.d.opErr(ctx, err)
	}
	return l.extended(resp.Succeeded, started, ttl)
}

// extendable returns ErrNotHeld when the lease has ended or its etcd lease
// is known lost, ending it in the latter case.
func (l *lease) extendable() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return driver.ErrNotHeld
	}
	// Its keepers tell it of their loss, but maybe not yet.
	for _, k := range l.keepers() {
		if err := k.lost(); err != nil {
			l.end(err)
			return driver.ErrNotHeld
		}
	}
	return nil
}

// confirmAll confirms each keeper (each once) by a keepalive sent no
// earlier than a third of its TTL before now.
func confirmAll(ctx context.Context, d *Driver, ks []*keeper) error {
	now := time.Now()
	for i, k := range ks {
		if slices.Contains(ks[:i], k) {
			continue
		}
		if err := k.confirm(ctx, now.Add(-k.ttl/3)); err != nil {
			return err
		}
	}
	return nil
}

// keeperFailed turns a failed confirmation of one of l's etcd leases into
// Extend's result: ErrNotHeld (and the lease ended) when the etcd lease is
// lost, the failure otherwise.
func (l *lease) keeperFailed(ctx context.Context, err error) error {
	for _, k := range l.keepers() {
		if lostErr := k.lost(); lostErr != nil && !l.d.closing() {
			l.mu.Lock()
			l.end(lostErr)
			l.mu.Unlock()
			return driver.ErrNotHeld
		}
	}
	return l.d.opErr(ctx, err)
}

// extended finishes an extension whose check, made by a call that started
// at started, found the key still ours (or not).
func (l *lease) extended(ours bool, started time.Time, ttl time.Duration) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !ours {
		l.end(errGone)
		return driver.ErrNotHeld
	}
	if l.ended {
		return driver.ErrNotHeld // the driver's deadline passed meanwhile
	}
	l.until, l.ttlNow = started.Add(ttl), ttl
	l.d.deadlines.Schedule(&l.expiry, l, l.until)
	l.SetValidity(l.promise(started))
	return nil
}

// owned returns the lease's keys with the revision each must still have.
func (l *lease) owned() []owned {
	own := []owned{{l.key, l.rev}}
	if l.hold != nil {
		own = append(own, owned{l.hold.name, l.hold.tok})
	}
	return own
}

// keepers returns the etcd leases the lock lives under.
func (l *lease) keepers() []*keeper {
	if l.hold != nil {
		return []*keeper{l.sess, l.hold.k}
	}
	return []*keeper{l.sess}
}

// ours is the comparison that holds while the lock is this lease's: its
// keys were created by the grant and never written since. The mod revision
// catches a key overwritten in place, which keeps its create revision.
func (l *lease) ours() []clientv3.Cmp { return ours(l.owned()) }

// Release deletes the lock's key if it is still this lease's (see Extend),
// in one transaction, so that a retried or late release never deletes a
// newer lock, even one of the same session (etcd issue #22082). A reentrant
// hold's key goes with its last member. A lease that already ended returns
// ErrNotHeld.
func (l *lease) Release(ctx context.Context) error {
	if err := l.d.enter(ctx); err != nil {
		return err
	}
	l.mu.Lock()
	l.onLoss = nil // the core no longer listens
	if l.ended || !l.d.deadlines.Remove(&l.expiry) {
		// Ended, or the driver's deadline passed and the deadline queue is
		// deleting the key.
		l.mu.Unlock()
		return driver.ErrNotHeld
	}
	l.mu.Unlock()
	removed, err := l.remove(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err != nil:
		// The key may still be there: the driver's deadline frees it.
		if !l.ended {
			l.d.deadlines.Schedule(&l.expiry, l, l.until)
		}
		return l.d.opErr(ctx, err)
	case !removed:
		l.end(errGone)
		return driver.ErrNotHeld
	}
	l.end(errReleased)
	return nil
}

// remove deletes the lease's key if it is still this lease's.
func (l *lease) remove(ctx context.Context) (bool, error) {
	if l.hold != nil {
		return l.hold.leave(ctx, l.d, l.key, l.rev)
	}
	return removeContender(ctx, l.d.cli, l.key, l.rev)
}

// removeContender deletes the queue entry key created at rev, if it is still
// the one created then.
func removeContender(ctx context.Context, cli *clientv3.Client, key string, rev int64) (bool, error) {
	resp, err := cli.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(key), "=", rev),
		clientv3.Compare(clientv3.ModRevision(key), "=", rev),
	).Then(clientv3.OpDelete(key)).Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

// expire runs when the driver's own deadline comes in the deadline queue:
// unless an Extend moved it meanwhile, the lease is lost, and its key is
// deleted in the background, retried until it is done or the session ends
// (which deletes it anyway).
func (l *lease) expire() {
	l.mu.Lock()
	if l.ended {
		l.mu.Unlock()
		return
	}
	if time.Now().Before(l.until) {
		l.d.deadlines.Schedule(&l.expiry, l, l.until)
		l.mu.Unlock()
		return
	}
	l.end(fmt.Errorf("%w (TTL %v)", errExpired, l.ttlNow))
	l.mu.Unlock()
	l.d.spawn(func() {
		retryTidy(l.sess, func(ctx context.Context) error {
			_, err := l.remove(ctx)
			return err
		})
	})
}
