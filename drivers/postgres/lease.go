package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/leasekit"
)

// Reasons of a lease's end, as its lost context (and so OnLoss) reports them.
var (
	// errExpired: the lease was not renewed within its TTL, so the driver
	// ended its session, as the server would (idle_session_timeout).
	errExpired = errors.New("postgres: the lease was not renewed within its TTL; its session was ended")
	// errNotHeldAnyMore: the heartbeat found the session alive but without
	// the lock.
	errNotHeldAnyMore = errors.New("postgres: the session no longer holds the advisory lock")
	// errReleased ends the lost context of a lease released normally (and is
	// reported to no one).
	errReleased = errors.New("postgres: the lease was released")
	// errEnded: the lease has no session any more (lost or released).
	errEnded = errors.New("postgres: the lease ended")
)

// lease is one lock held by a session of its own. The lock ends with the
// session, and the session ends when the lease is released (its locks are
// unlocked and the connection goes back to the idle list), when it is not
// renewed within its TTL (the server's idle_session_timeout, or the driver's
// own timer where the server has none, ends the session), or when the
// connection dies.
//
// One statement at a time runs on the session. A heartbeat whose caller
// gives up (the core bounds each renewal attempt to a third of the TTL)
// goes on in the background and still counts; the next Extend or Release
// waits for it. Only when the lease's validity has passed unconfirmed is a
// heartbeat still in flight cut off, by breaking the connection.
type lease struct {
	// Grant holds the fencing token of the grant (see "Guarantees" in the
	// package documentation), and as the validity the TTL of the latest
	// renewal, or for the grant the TTL plus the time the acquisition
	// statement waited in PostgreSQL's queue, as the server measured it:
	// the server ends an unrenewed session no earlier than the TTL after
	// the grant, and the grant came that long after the call started.
	leasekit.Grant
	d     *Driver
	mode  driver.Mode
	owner string
	keys  lockKeys
	// check is the advisory key the heartbeat looks for in pg_locks: the
	// lock's own for plain locks, the group's for owner members.
	check int64

	// lost is cancelled, with the reason as its cause, when the lease ends:
	// lost (the connection ended, the heartbeat found no lock, the TTL ran
	// out, the Driver was closed) or released.
	lost context.Context
	lose context.CancelCauseFunc

	// lossMu guards onLoss, which the callback that lost's AfterFunc runs
	// calls under it, so that Release, which clears it, returns only once
	// no call of it is under way.
	lossMu   sync.Mutex
	onLoss   func(error) // the core's (OnLoss); nil once told, and from Release on
	stopLoss func() bool // stops lost's AfterFunc; nil before OnLoss

	mu sync.Mutex
	s  *session // nil once the lease ended
	w  *watch   // the running watch; nil before the first heartbeat and while a statement runs on s
	// busy is closed when the statement running on s ends; nil when none
	// runs.
	busy chan struct{}
	// expiresAt is the start of the latest confirmed grant or heartbeat
	// plus its validity: past it, the server may end the session.
	expiresAt time.Time
	// expiry ends the session at expiresAt where the server cannot (see
	// armExpiry); nil otherwise.
	expiry   *time.Timer
	released bool
}

var _ driver.Lease = (*lease)(nil)

func (d *Driver) newLease(s *session, req driver.Request, k lockKeys, token uint64, validity time.Duration, started time.Time) *lease {
	l := &lease{d: d, mode: req.Mode, owner: req.Owner, keys: k, check: k.main, s: s}
	if req.Owner != "" {
		l.check = k.group
	}
	l.Start(token, validity)
	l.lost, l.lose = context.WithCancelCause(context.Background())
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expiresAt = started.Add(validity)
	l.armExpiry(req.TTL)
	// The watch starts with the first heartbeat: a lock held for less than
	// a renewal period (most are) then costs no goroutine and no read, and
	// a loss before that is found by the heartbeat (see "Guarantees").
	d.track(l)
	if d.closed.Load() {
		// Close ran while the grant was on its way and missed this lease.
		l.lose(driver.ErrClosed)
		s.abort()
	}
	return l
}

// OnLoss calls f, once, when the lease is lost: the connection ended, the
// heartbeat found no lock, the TTL ran out, or the Driver was closed (with
// driver.ErrClosed). At once, when it already was. It watches the lease's
// lost context with context.AfterFunc, which Release stops: once Release
// has returned, f is never called.
func (l *lease) OnLoss(f func(reason error)) {
	l.lossMu.Lock()
	defer l.lossMu.Unlock()
	if l.lost.Err() != nil {
		if cause := context.Cause(l.lost); cause != errReleased {
			f(cause)
		}
		return
	}
	l.onLoss = f
	l.stopLoss = context.AfterFunc(l.lost, l.tellLoss)
}

// tellLoss runs when the lost context is cancelled: it tells the core why,
// unless the lease was released.
func (l *lease) tellLoss() {
	cause := context.Cause(l.lost)
	l.lossMu.Lock()
	defer l.lossMu.Unlock()
	if f := l.onLoss; f != nil && cause != errReleased {
		l.onLoss = nil
		f(cause)
	}
}

// forgetLoss stops reporting losses: the core no longer listens.
func (l *lease) forgetLoss() {
	l.lossMu.Lock()
	defer l.lossMu.Unlock()
	l.onLoss = nil
	if l.stopLoss != nil {
		l.stopLoss()
		l.stopLoss = nil
	}
}

// Uncertain returns nil: the driver cannot tell a lock's state is unknown
// before a heartbeat fails (the core then reports it uncertain itself).
func (l *lease) Uncertain() error { return nil }

// ended is called by the watch, from its goroutine, when the connection
// ends: the lease is lost, and its session is dropped in the background
// (this goroutine must not wait for the lease's lock).
func (l *lease) ended(cause error) {
	if l.d.closed.Load() {
		cause = driver.ErrClosed
	}
	l.lose(cause)
	go l.reap()
}

// expire runs when the lease was not renewed within its validity, where the
// server does not end the session by itself: the driver ends it.
func (l *lease) expire() {
	l.lose(errExpired)
	go l.reap()
}

// armExpiry makes sure that the session ends at the latest at l.expiresAt
// unless renewed. The server does that itself (idle_session_timeout) on
// PostgreSQL 14 and later for TTLs up to 24.8 days, and its end then reaches
// the watch; otherwise a timer of the driver's does it. Callers hold l.mu.
func (l *lease) armExpiry(ttl time.Duration) {
	if p := idleParam(l.s, ttl); p != "" && p != "0" {
		if l.expiry != nil {
			l.expiry.Stop()
			l.expiry = nil
		}
		return
	}
	if l.expiry == nil {
		l.expiry = time.AfterFunc(time.Until(l.expiresAt), l.expire)
		return
	}
	l.expiry.Reset(time.Until(l.expiresAt))
}

// reap drops the session of a lost lease.
func (l *lease) reap() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dropLocked()
}

// dropLocked ends the lease's session, if it still has one: at once, or,
// while a statement runs on it, by breaking the connection, which makes the
// statement fail and its goroutine drop the session. Callers hold l.mu.
func (l *lease) dropLocked() {
	if l.s == nil {
		return
	}
	if l.busy != nil {
		l.s.abort()
		return
	}
	if l.w != nil {
		_ = l.w.stop()
		l.w = nil
	}
	if l.expiry != nil {
		l.expiry.Stop()
	}
	s := l.s
	l.s = nil
	l.d.sessions.drop(s)
	l.d.forget(l)
}

// begin waits until no statement runs on the lease's session (bounded by
// ctx), then stops the watch and marks the session busy for the caller's
// statement, whose end the caller reports with finishLocked. It returns
// errEnded when the lease has no session any more.
func (l *lease) begin(ctx context.Context) (*session, error) {
	for {
		l.mu.Lock()
		if l.s == nil || l.lost.Err() != nil {
			l.dropLocked()
			l.mu.Unlock()
			return nil, errEnded
		}
		if l.busy == nil {
			if l.w != nil {
				err := l.w.stop()
				l.w = nil
				if err != nil {
					l.lose(err)
					l.dropLocked()
					l.mu.Unlock()
					return nil, errEnded
				}
			}
			l.busy = make(chan struct{})
			s := l.s
			l.mu.Unlock()
			return s, nil
		}
		busy := l.busy
		l.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// finishLocked ends the statement begin started: the session is watched
// again while the lease holds it, and dropped when the lease was lost
// meanwhile. Callers hold l.mu.
func (l *lease) finishLocked() {
	close(l.busy)
	l.busy = nil
	switch {
	case l.s == nil:
	case l.lost.Err() != nil:
		l.dropLocked()
	default:
		l.w = startWatch(l.s, l.ended)
	}
}

// Extend is the heartbeat: on the lease's own connection it checks that the
// session is the driver's (the same backend, the same marker), that it
// still holds the lock (pg_locks), and restarts the server's idle timer with
// ttl. A session that lost the lock, or that the server ended, returns
// ErrNotHeld; a failure of the connection ends the lease (OnLoss says why) and returns the failure. When ctx ends first, Extend returns its
// error and the heartbeat goes on: its outcome still counts.
func (l *lease) Extend(ctx context.Context, ttl time.Duration) error {
	if err := l.d.enter(ctx); err != nil {
		return err
	}
	s, err := l.begin(ctx)
	if err != nil {
		if errors.Is(err, errEnded) {
			return driver.ErrNotHeld
		}
		return err
	}
	out := make(chan error, 1)
	go func() { out <- l.heartbeat(s, ttl) }()
	select {
	case err := <-out:
		if err != nil {
			return l.d.opErr(ctx, err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// heartbeat runs the heartbeat statement on s, which begin made busy, and
// applies its outcome.
func (l *lease) heartbeat(s *session, ttl time.Duration) error {
	started := time.Now()
	l.mu.Lock()
	// Past its validity the lease is lost whatever the heartbeat says: do
	// not let one that hangs (a frozen server) keep the session.
	guard := time.AfterFunc(time.Until(l.expiresAt), s.abort)
	l.mu.Unlock()
	idle := idleParam(s, ttl)
	row, err := s.query(l.d.stmts.heartbeat, []uint32{oidText, oidInt8, oidText},
		[]byte(s.marker), int8Bytes(l.check), []byte(idle))
	guard.Stop()
	switch {
	case err != nil:
		s.applied = ""
	case idle != "":
		s.applied = idle
	}
	if err == nil && len(row) != 4 {
		err = fmt.Errorf("postgres: heartbeat returned %d columns, want 4", len(row))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.finishLocked()
	if err != nil {
		l.lose(fmt.Errorf("postgres: heartbeat: %w", err))
		if sessionEnded(err) || s.broken.Load() {
			return driver.ErrNotHeld
		}
		return err
	}
	pid, _ := decodeInt4(row[1])
	switch {
	case !decodeBool(row[0]) || uint32(pid) != s.pid:
		err := sessionChanged("the heartbeat reached backend %d, the lock was taken by backend %d", pid, s.pid)
		l.lose(err)
		return err
	case !decodeBool(row[2]):
		l.lose(errNotHeldAnyMore)
		return driver.ErrNotHeld
	case l.lost.Err() != nil:
		return driver.ErrNotHeld // the expiry timer fired meanwhile
	}
	l.SetValidity(ttl)
	l.expiresAt = started.Add(ttl)
	l.armExpiry(ttl)
	return nil
}

// Release unlocks the lease's locks on its session (pg_advisory_unlock_all:
// the session holds nothing else) and keeps the connection for the next
// lock. A lease that already ended returns ErrNotHeld: its session, and so
// its lock, is gone. When ctx ends before the unlock is done, the
// connection is broken instead, which ends the session and its locks. From
// Release on, no loss is reported (OnLoss).
func (l *lease) Release(ctx context.Context) error {
	l.forgetLoss()
	if err := l.d.enter(ctx); err != nil {
		return err
	}
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return driver.ErrNotHeld
	}
	l.released = true
	l.mu.Unlock()
	s, err := l.begin(ctx)
	if err != nil {
		if errors.Is(err, errEnded) {
			return driver.ErrNotHeld
		}
		// A heartbeat still runs: end the session under it.
		l.mu.Lock()
		l.lose(errReleased)
		l.dropLocked()
		l.mu.Unlock()
		return err
	}
	if l.owner != "" {
		err = l.releaseOwner(ctx, s)
	} else {
		err = releaseSession(ctx, l.d, s, abortAtOnce, true)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		// The connection is dropped, which ends the session and its lock.
		l.lose(fmt.Errorf("postgres: release: %w", err))
		l.finishLocked()
		if sessionEnded(err) {
			return driver.ErrNotHeld // it had ended already: nothing to release
		}
		return l.d.opErr(ctx, err)
	}
	if l.lost.Err() != nil {
		// Lost while the unlock ran (the expiry timer): the session goes.
		l.finishLocked()
		return driver.ErrNotHeld
	}
	l.lose(errReleased)
	close(l.busy)
	l.busy = nil
	if l.expiry != nil {
		l.expiry.Stop()
	}
	l.s = nil
	l.d.forget(l)
	l.d.sessions.put(s)
	return nil
}

// releaseOwner ends the session's membership of its owner group.
func (l *lease) releaseOwner(ctx context.Context, s *session) error {
	var row []string
	_, err := s.interruptible(ctx, abortAtOnce, func() error {
		var err error
		row, err = s.simple(context.Background(), l.d.ownerReleaseSQL(s, l.keys))
		return err
	})
	if err != nil {
		s.applied = ""
		return err
	}
	s.applied = s.idle // the block restores it
	if len(row) != 1 || row[0] != "released" {
		return sessionChanged("the release statement reached a server session that is not the driver's")
	}
	return nil
}
