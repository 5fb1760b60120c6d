package driver

import (
	"errors"
	"fmt"
	"time"
)

// These sentinels are shared by drivers and the core; package dlock exports the
// same values under the same names, so errors.Is works with either.
var (
	// ErrLocked: another owner holds the lock. Returned by Acquire only
	// when nothing of the attempt is left on the backend (and by Transfer
	// when the hold cannot be handed over as a whole).
	ErrLocked = errors.New("dlock: locked by another owner")

	// ErrNotHeld: the lease is no longer this holder's (it expired, was
	// released, or the key now belongs to someone else). Returned by Extend
	// and Release, which then changed nothing.
	ErrNotHeld = errors.New("dlock: lock not held")

	// ErrClosed: the client was closed.
	ErrClosed = errors.New("dlock: client closed")
)

// LockedError is an ErrLocked that tells the core how long the current holder's
// lease still runs, so that a waiter without notifications does not poll
// sooner than it must, nor sleep past the expiry.
type LockedError struct {
	// RetryAfter is the holder's remaining TTL as the backend saw it, or zero
	// when unknown.
	RetryAfter time.Duration

	// Queued is set when the driver queued the request in the backend's
	// own line of waiters (a Request with Wait) and its Notifier wakes the
	// waiter when the lock is its turn. Polling sooner would only cost
	// requests, so the core then tries again at a wake-up, or once
	// RetryAfter (which must be positive) has passed, which is when the
	// driver needs the waiter back to keep its place in line.
	Queued bool
}

// Error says the lock is held, and for how long.
func (e *LockedError) Error() string {
	if e.RetryAfter <= 0 {
		return ErrLocked.Error()
	}
	return fmt.Sprintf("%s (expires in %v)", ErrLocked, e.RetryAfter.Round(time.Millisecond))
}

// Is makes errors.Is(err, ErrLocked) true.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }
