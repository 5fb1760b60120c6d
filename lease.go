package dlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/deadline"
)

// lease implements Lease. Its expiry and its renewal are scheduled by its
// Client's renewer, and the driver tells it of a loss through a callback
// (driver.Lease.OnLoss): a held lease costs no goroutine and no timer.
type lease struct {
	m        *mutex
	d        driver.Lease
	acquired time.Time
	done     chan struct{} // made by Done; under mu

	// The small fields together, where they pack into one word: a Client
	// may hold thousands of leases.
	mode     driver.Mode
	offset   uint32      // of Token in its grant's block of tokens: leases handed over without the backend count up (handoff.go)
	unlocked bool        // Unlock has been called; under mu
	started  bool        // start armed it; telemetry counts it as held; under mu
	ended    atomic.Bool // set before the renewer is told to forget the lease

	mu       sync.Mutex // guards the five fields below and those marked; the lock order: handoff.go
	deadline time.Time
	err      error                  // nil while held; why it ended otherwise
	lastErr  error                  // the latest failed renewal, reported if the deadline passes
	expiry   deadline.Entry[*lease] // in the renewer's expiry queue, at deadline
	loss     *lossRoute             // where the driver's loss report goes, when the hold may be handed over

	// Owned by the Client's renewer, under its lock.
	renewAt   time.Time
	heapIndex int
}

var _ Lease = (*lease)(nil)

// errRenewalRefused is the reason of a loss found by renewal.
var errRenewalRefused = fmt.Errorf("renewal refused, the lock expired or another owner holds it: %w", ErrNotHeld)

// newLease wraps a grant whose acquisition started at started.
func newLease(m *mutex, d driver.Lease, started time.Time, mode driver.Mode) *lease {
	return &lease{
		m:         m,
		d:         d,
		mode:      mode,
		acquired:  time.Now(),
		deadline:  m.validUntil(started, d.Validity()),
		heapIndex: -1,
	}
}

// validUntil is the deadline of a grant or renewal confirmed by a call that
// started at started: the backend's promise minus the safety margin.
func (m *mutex) validUntil(started time.Time, validity time.Duration) time.Time {
	return started.Add(validity - safetyMargin(m.cfg.ttl))
}

// start schedules the lease's expiry and renewal, and listens for the
// backend's own loss report. Called once the lease is tracked by its Client.
func (l *lease) start() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return // Close ended it between track and start
	}
	l.started = true
	l.m.c.tel.held.Add(context.Background(), 1, l.m.c.tel.modeAttrs[l.mode])
	l.m.c.renewer.expiry.Schedule(&l.expiry, l, l.deadline)
	if l.m.cfg.renew {
		at := l.renewAt // inherited from the lease it was handed over by, if any
		if at.IsZero() {
			at = l.renewDue()
		}
		l.m.c.renewer.schedule(l, at)
	}
	switch {
	case l.loss != nil: // handed over: the driver reports to the route
		l.loss.to(l)
	case l.m.transferable(l.mode) && l.m.c.caps.TokenBlock > 1:
		l.loss = &lossRoute{l: l}
		l.d.OnLoss(l.loss.lost)
	default:
		// The driver may call back under its own locks, which its
		// Lease methods take, and l.mu is held around some of those
		// calls: losing the lease is left to a goroutine of its own.
		l.d.OnLoss(func(reason error) { go l.lose(reason, "backend") })
	}
}

// renewInterval is a third of the validity the backend grants: of the TTL,
// or less when the backend promises less (whole-second expiry, a session
// timeout), so that two renewals can fail before the deadline.
func (l *lease) renewInterval() time.Duration { return min(l.m.cfg.ttl, l.d.Validity()) / 3 }

// renewDue is when the lease's next renewal is due: two renewal intervals
// before its deadline, which is a third of the validity after the
// confirming call started. It is counted from the deadline, not from the
// call's return, because a grant or renewal that was slow to come back (a
// backend restarting, a loaded machine) has used up part of its validity:
// counted from its return, the next renewal could fall after the deadline
// and lose a lease that was never in danger. Callers hold l.mu.
func (l *lease) renewDue() time.Time { return l.deadline.Add(-2 * l.renewInterval()) }

func (l *lease) Key() string   { return l.m.key }
func (l *lease) Token() uint64 { return l.d.Token() + uint64(l.offset) }

// Done makes its channel when first asked: as context's Done does, for the
// same reason (many leases are never selected on, and a channel is a third
// of a lease's memory).
func (l *lease) Done() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done == nil {
		if l.err != nil {
			return closedDone
		}
		l.done = make(chan struct{})
	}
	return l.done
}

// closedDone is the Done channel of a lease that ended before anyone asked.
var closedDone = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

func (l *lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

func (l *lease) Uncertain() error {
	l.mu.Lock()
	lastErr, ended := l.lastErr, l.err != nil
	l.mu.Unlock()
	if ended {
		return nil // Err says what happened
	}
	if lastErr != nil {
		return fmt.Errorf("last renewal failed: %w", lastErr)
	}
	return l.d.Uncertain()
}

func (l *lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// finish ends the lease with err, stopping its timers and closing Done;
// lossReason names the kind of loss, or is empty. It reports false when the
// lease had already ended. Callers hold l.mu.
func (l *lease) finish(err error, lossReason string) bool {
	if l.err != nil {
		return false
	}
	if l.started {
		l.m.c.tel.ended(l, lossReason, err)
	}
	l.err = err
	l.ended.Store(true)
	l.m.c.renewer.remove(l)
	l.m.c.renewer.expiry.Remove(&l.expiry)
	if l.done != nil {
		close(l.done)
	}
	l.m.c.untrack(l)
	return true
}

// lose ends the lease as lost, for reason, of the kind named.
func (l *lease) lose(reason error, kind string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.finish(lostError(reason), kind)
}

// expire runs when the lease's deadline comes in the expiry queue: unless a
// renewal moved the deadline meanwhile, the lease can no longer be trusted.
func (l *lease) expire() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return
	}
	if time.Now().Before(l.deadline) {
		l.m.c.renewer.expiry.Schedule(&l.expiry, l, l.deadline)
		return
	}
	l.finish(lostError(deadlineReason(l.lastErr)), "deadline")
}

// deadlineReason is why a lease whose deadline passed is lost; lastErr is
// its latest failed renewal, if any.
func deadlineReason(lastErr error) error {
	if lastErr != nil {
		return fmt.Errorf("validity deadline passed without a confirmed renewal; last renewal error: %w", lastErr)
	}
	return errors.New("validity deadline passed without a confirmed renewal")
}

// renew extends the lease once, now, and moves the deadline.
func (l *lease) renew(ctx context.Context) error {
	started := time.Now()
	err := l.d.Extend(ctx, l.m.cfg.ttl)
	if _, held := l.confirm(started, err); !held {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.endedErr()
	}
	return err
}

// confirm applies the outcome of an extension that started at started: a
// success moves the deadline, a refusal by the backend loses the lease, and
// any other failure is kept for Uncertain and the expiry report. It returns
// when to renew next (it may have passed: then at once), and false when the
// lease has ended.
func (l *lease) confirm(started time.Time, err error) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return time.Time{}, false
	}
	switch {
	case err == nil:
		if d := l.m.validUntil(started, l.d.Validity()); d.After(l.deadline) {
			l.deadline = d
			l.m.c.renewer.expiry.Schedule(&l.expiry, l, d)
		}
		l.lastErr = nil
		l.m.c.tel.renewed(l, "ok", nil)
		return l.renewDue(), true
	case errors.Is(err, ErrNotHeld):
		l.m.c.tel.renewed(l, "refused", err)
		l.finish(lostError(errRenewalRefused), "refused")
		return time.Time{}, false
	default:
		l.lastErr = err
		l.m.c.tel.renewed(l, "failed", err)
		return time.Now().Add(retryDelay(l.m.cfg.ttl)), true
	}
}

// endedErr is what Extend and Unlock report on a lease that already ended.
// Callers hold l.mu.
func (l *lease) endedErr() error {
	if errors.Is(l.err, ErrClosed) {
		return ErrClosed
	}
	if l.unlocked {
		return ErrNotHeld
	}
	return l.err
}

func (l *lease) Extend(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	if l.err != nil {
		err := l.endedErr()
		l.mu.Unlock()
		return err
	}
	l.mu.Unlock()
	return wrapErr(ctx, "extend", l.m.key, l.renew(ctx))
}

func (l *lease) Unlock(ctx context.Context) error {
	c := l.m.c
	if !c.beginOp() {
		// Close is under way: it releases the lease, or already has.
		l.mu.Lock()
		defer l.mu.Unlock()
		switch {
		case l.unlocked:
			return ErrNotHeld
		case l.err != nil && !errors.Is(l.err, ErrClosed):
			return l.err // lost before Unlock: that is the news
		}
		return ErrClosed
	}
	// The release or transfer is an operation: Close waits for it before
	// it closes the driver.
	defer c.ops.Done()
	l.mu.Lock()
	if l.unlocked || errors.Is(l.err, ErrClosed) {
		err := l.endedErr()
		l.mu.Unlock()
		return err
	}
	if l.err == nil && !time.Now().Before(l.deadline) {
		// The deadline passed before Unlock, and the expiry queue has
		// not said so yet: the lease was lost before Unlock all the same.
		l.finish(lostError(deadlineReason(l.lastErr)), "deadline")
	}
	l.unlocked = true
	ended := l.err
	l.finish(ErrNotHeld, "")
	deadline := l.deadline // no longer moved: renewal stopped with finish
	l.mu.Unlock()

	bctx, stop := c.bound(ctx)
	defer stop()
	transferred, yield, err := l.transfer(bctx, ended == nil)
	if !transferred {
		err = l.release(bctx)
		if err == nil && !yield {
			c.kick(l.m.key)
		}
	}
	c.unlocked(l)
	if ended != nil {
		return ended // lost before Unlock: that is the news
	}
	if errors.Is(err, ErrNotHeld) {
		if !time.Now().Before(deadline) {
			// The lock expired while the release was on its way,
			// after the lease's deadline: it is free, as asked.
			return nil
		}
		// The backend had let the lock go while the lease was still
		// valid: it was lost unnoticed. Unlock says so as it would of a
		// loss found before it, and Err says the same.
		err = lostError(err)
		l.mu.Lock()
		l.err = err
		l.mu.Unlock()
		c.tel.lostAtUnlock(l, err)
		return err
	}
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(bctx), ErrClosed) {
		return ErrClosed // Close gave up waiting: the lock ends by its TTL
	}
	return wrapErr(ctx, "unlock", l.m.key, err)
}

// release gives the lock back on the backend. With a context that has already
// ended it still does, in the background and bounded by the TTL (and by a
// Close that gives up waiting), so that `defer lease.Unlock(ctx)` on a
// finished request does not hold the lock for a whole TTL.
func (l *lease) release(ctx context.Context) error {
	err := ctx.Err()
	if err == nil {
		return l.d.Release(ctx)
	}
	c := l.m.c
	cleanup, cancel := cleanupContext(ctx, l.m.cfg.ttl)
	cleanup, stop := c.bound(cleanup)
	if !c.beginOp() {
		// Closing: Close waits for the Unlock that called release, so
		// give the lock back here.
		defer cancel()
		defer stop()
		_ = l.d.Release(cleanup)
		return err
	}
	go func() {
		defer c.ops.Done() // Close waits for it
		defer cancel()
		defer stop()
		_ = l.d.Release(cleanup)
	}()
	return err
}

// end finishes a held lease with reason and releases it, for Close and for a
// grant that arrived after Close.
func (l *lease) end(ctx context.Context, reason error) error {
	l.mu.Lock()
	held := l.finish(reason, "")
	l.mu.Unlock()
	if !held {
		return ErrNotHeld
	}
	return l.d.Release(ctx)
}
