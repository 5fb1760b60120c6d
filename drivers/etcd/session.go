package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/connectivity"

	"github.com/dlock-go/dlock/driver"
)

// ErrSessionLost is the reason (wrapped, with details) of every loss caused
// by the end of an etcd lease that locks live under: the Driver's session
// lease, or the shared lease of a reentrant hold. The lease ends when etcd
// says it no longer exists, or when no keepalive was confirmed for its whole
// TTL, after which etcd may have let it expire. Held leases report it
// through Lease.OnLoss, and a blocking Acquire returns it (not ErrLocked)
// when it happens while waiting, marked transient, so that a waiting dlock
// Lock queues again under a new session.
var ErrSessionLost = errors.New("etcd: session lease lost")

// keeper keeps one etcd lease alive and knows, on the monotonic clock, a
// time before which etcd cannot have let it expire: the start of the latest
// confirmed keepalive plus the TTL it confirmed. A keeper runs one goroutine,
// which sends a keepalive every TTL/3 and more often while they fail, and
// declares the lease lost (ctx is cancelled with the reason) when etcd says
// it is gone or when that time passes unconfirmed. Then it tells every lock
// held under the lease (registered with register).
type keeper struct {
	d   *Driver
	id  clientv3.LeaseID
	ttl time.Duration // as etcd granted it (keepalives confirm the same)
	// revokeOnLoss: when the keeper gives the lease up, it revokes it, so
	// that the locks it told its holders were lost are really gone. Only for
	// the Driver's own session: a reentrant hold's lease is shared with
	// other clients that may still keep it alive.
	revokeOnLoss bool

	ctx  context.Context // cancelled when the lease is lost or the Driver closed
	lose context.CancelCauseFunc

	mu        sync.Mutex
	expiry    time.Time // etcd keeps the lease at least until then
	confirmed time.Time // start of the latest confirmed keepalive
	lastErr   error     // the latest failed keepalive, nil after a success
	inflight  *keepalive
	timer     *time.Timer // fires at expiry

	users int // for reentrant holds: this Driver's leases under it; under d.mu

	// fence is the mod revision of the session's fence key as this Driver
	// last saw it (0: none yet); see fence.go.
	fence atomic.Int64

	// The locks held under the lease, told of its loss; nil once told.
	// Under mu.
	leases map[*lease]struct{}
	told   bool
}

// keepalive is one KeepAliveOnce call, shared by everyone who needs a
// confirmation sent no earlier than its start.
type keepalive struct {
	sent time.Time
	done chan struct{}
	err  error
}

// newKeeper starts keeping the lease id, granted or confirmed with ttl by a
// call that started at sent; false after Close.
func (d *Driver) newKeeper(id clientv3.LeaseID, ttl time.Duration, sent time.Time, revokeOnLoss bool) (*keeper, bool) {
	k := &keeper{d: d, id: id, ttl: ttl, revokeOnLoss: revokeOnLoss, leases: map[*lease]struct{}{}}
	k.ctx, k.lose = context.WithCancelCause(d.ctx)
	context.AfterFunc(k.ctx, k.tell)
	k.expiry, k.confirmed = sent.Add(ttl), sent
	k.mu.Lock()
	k.timer = time.AfterFunc(time.Until(k.expiry), k.expire)
	k.mu.Unlock()
	if !d.spawn(k.run) {
		k.lose(driver.ErrClosed)
		k.timer.Stop()
		return nil, false
	}
	return k, true
}

// raiseFence records that the fence key was put at rev, unless a later put
// was recorded already.
func (k *keeper) raiseFence(rev int64) {
	for {
		seen := k.fence.Load()
		if seen >= rev || k.fence.CompareAndSwap(seen, rev) {
			return
		}
	}
}

// lostIfGone turns err, from a write under the lease, into the lease's
// loss when etcd says it no longer has the lease (it expired during an
// outage, or was revoked): the keeper is lost at once, so that the next
// request takes a new session, and the error wraps ErrSessionLost, which
// a waiting Lock rides out. Any other err is returned as it is.
func (k *keeper) lostIfGone(err error) error {
	if !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return err
	}
	reason := fmt.Errorf("%w: etcd no longer has lease %x (it expired or was revoked): %w", ErrSessionLost, uint64(k.id), err)
	k.lose(reason)
	return reason
}

// lost reports the reason when the lease is lost (or the Driver closed).
func (k *keeper) lost() error {
	if k.ctx.Err() == nil {
		return nil
	}
	return context.Cause(k.ctx)
}

// register adds l to the locks told when the lease is lost. It returns the
// reason instead when the lease is already lost.
func (k *keeper) register(l *lease) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.told {
		return context.Cause(k.ctx)
	}
	k.leases[l] = struct{}{}
	return nil
}

// forget removes l, ended, from the locks told when the lease is lost.
func (k *keeper) forget(l *lease) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.leases, l)
}

// tell runs once, when ctx ends: it tells every lock held under the lease
// that it is lost, with ctx's cause.
func (k *keeper) tell() {
	k.mu.Lock()
	leases := k.leases
	k.leases, k.told = nil, true
	k.mu.Unlock()
	reason := context.Cause(k.ctx)
	for l := range leases {
		l.lose(reason)
	}
}

// until returns the time before which etcd keeps the lease.
func (k *keeper) until() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.expiry
}

// uncertain returns why the lease's state is not known right now: the
// latest keepalive failed, none was confirmed for longer than the keepalive
// period plus a tenth of the TTL (one is hanging), or the connection to
// etcd is down.
func (k *keeper) uncertain() error {
	k.mu.Lock()
	lastErr, since := k.lastErr, time.Since(k.confirmed)
	k.mu.Unlock()
	if lastErr != nil {
		return fmt.Errorf("etcd: keepalive of lease %x failing: %w", uint64(k.id), lastErr)
	}
	if since > k.ttl/3+k.ttl/10 {
		return fmt.Errorf("etcd: no keepalive of lease %x confirmed for %v", uint64(k.id), since.Round(time.Millisecond))
	}
	if s := k.d.cli.ActiveConnection().GetState(); s == connectivity.TransientFailure || s == connectivity.Shutdown {
		return fmt.Errorf("etcd: connection %s", s)
	}
	return nil
}

// run sends a keepalive every TTL/3 after the latest confirmed one, and
// every TTL/10 while they fail, until the lease is lost or the Driver closed.
func (k *keeper) run() {
	timer := time.NewTimer(k.ttl / 3)
	defer timer.Stop()
	for {
		select {
		case <-k.ctx.Done():
			k.afterLoss()
			return
		case <-timer.C:
		}
		err := k.confirm(k.ctx, time.Now())
		k.mu.Lock()
		next := time.Until(k.confirmed.Add(k.ttl / 3))
		k.mu.Unlock()
		if err != nil {
			next = max(k.ttl/10, 10*time.Millisecond)
		}
		timer.Reset(max(next, time.Millisecond))
	}
}

// confirm returns once etcd confirmed the lease by a keepalive sent no
// earlier than since: at once when one was, by joining the keepalive in
// flight when it was sent late enough, or by sending one. It returns an
// error wrapping ErrSessionLost when the lease is gone, the keepalive's
// error when it failed, or ctx's.
func (k *keeper) confirm(ctx context.Context, since time.Time) error {
	if err := k.lost(); err != nil {
		return err
	}
	k.mu.Lock()
	if !k.confirmed.Before(since) {
		k.mu.Unlock()
		return nil
	}
	c := k.inflight
	if c == nil || c.sent.Before(since) {
		c = &keepalive{sent: time.Now(), done: make(chan struct{})}
		if !k.d.spawn(func() { k.send(c) }) {
			k.mu.Unlock()
			return driver.ErrClosed
		}
		k.inflight = c
	}
	k.mu.Unlock()
	select {
	case <-c.done:
		if c.err != nil {
			if err := k.lost(); err != nil {
				return err
			}
		}
		return c.err
	case <-ctx.Done():
		return ctx.Err()
	case <-k.ctx.Done():
		return k.lost()
	}
}

// send runs one keepalive, bounded by a third of the TTL so that a hung one
// is retried in time, and records its outcome.
func (k *keeper) send(c *keepalive) {
	defer close(c.done)
	ctx, cancel := context.WithTimeout(k.ctx, max(k.ttl/3, 100*time.Millisecond))
	resp, err := k.d.cli.KeepAliveOnce(ctx, k.id)
	cancel()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.inflight == c {
		k.inflight = nil
	}
	switch {
	case err == nil:
		ttl := time.Duration(resp.TTL) * time.Second
		if c.sent.After(k.confirmed) {
			k.confirmed = c.sent
		}
		if e := c.sent.Add(ttl); e.After(k.expiry) {
			k.expiry = e
			k.timer.Reset(time.Until(e))
		}
		k.lastErr = nil
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		c.err = fmt.Errorf("%w: etcd no longer has lease %x (it expired or was revoked)", ErrSessionLost, uint64(k.id))
		k.lose(c.err)
	case k.ctx.Err() != nil:
		c.err = context.Cause(k.ctx)
	default:
		c.err = err
		k.lastErr = err
	}
}

// expire runs when the lease's known expiry passes: unless a keepalive moved
// it meanwhile, etcd may have let the lease go, so it is lost.
func (k *keeper) expire() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if left := time.Until(k.expiry); left > 0 {
		k.timer.Reset(left)
		return
	}
	reason := fmt.Errorf("%w: no keepalive of lease %x confirmed within its TTL of %v", ErrSessionLost, uint64(k.id), k.ttl)
	if k.lastErr != nil {
		reason = fmt.Errorf("%w; last keepalive error: %v", reason, k.lastErr) // not wrapped: it is not what ended the lease
	}
	k.lose(reason)
}

// afterLoss runs in the keeper's goroutine once the lease is lost: it stops
// the expiry timer and, for the Driver's session, revokes the lease, so that
// locks whose holders were told they lost them do not linger until etcd
// expires the lease by itself. It tries for one TTL, and not at all after
// Close (Close must not release locks).
func (k *keeper) afterLoss() {
	k.mu.Lock()
	k.timer.Stop()
	k.mu.Unlock()
	if !k.revokeOnLoss || k.d.closing() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(k.ctx), max(k.ttl, 5*time.Second))
	defer cancel()
	stop := context.AfterFunc(k.d.ctx, cancel)
	defer stop()
	_, _ = k.d.cli.Revoke(ctx, k.id)
}
