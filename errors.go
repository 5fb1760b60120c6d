package dlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlock-go/dlock/driver"
)

// Sentinel errors. Compare with errors.Is: the errors dlock returns wrap them.
var (
	// ErrLocked: TryLock or TryRLock found the lock held by another owner.
	// The same value as driver.ErrLocked.
	ErrLocked = driver.ErrLocked

	// ErrNotHeld: Unlock or Extend on a lease that already ended (it was
	// unlocked, or its end was already reported). The same value as
	// driver.ErrNotHeld.
	ErrNotHeld = driver.ErrNotHeld

	// ErrClosed: the Client was closed. The same value as driver.ErrClosed.
	ErrClosed = driver.ErrClosed

	// ErrLockLost: the lease was lost before its holder unlocked it. The
	// error that carries it also wraps the reason: the backend refused a
	// renewal (ErrNotHeld), a renewal failed (the backend's error) until the
	// validity deadline passed, or the backend reported the session or
	// connection gone.
	ErrLockLost = errors.New("dlock: lock lost")

	// ErrInvalidKey: the key is empty, longer than 1024 bytes, or outside the
	// limits the driver states.
	ErrInvalidKey = errors.New("dlock: invalid key")

	// ErrInvalidTTL: the TTL is outside 10 ms to 30 days, or outside the
	// limits the driver states.
	ErrInvalidTTL = errors.New("dlock: invalid TTL")

	// ErrInvalidURL: Open could not parse the URL, or no driver is registered
	// for its scheme, or the driver refused the URL.
	ErrInvalidURL = errors.New("dlock: invalid URL")

	// ErrInvalidOption: an Option was given a value it does not accept.
	ErrInvalidOption = errors.New("dlock: invalid option")

	// ErrInvalidPermits: a Semaphore was asked for fewer than 1 or more
	// than MaxPermits permits.
	ErrInvalidPermits = errors.New("dlock: invalid number of permits")

	// ErrUnavailable: Open could not connect to the backend, or the backend
	// refused the connection (nothing listens, wrong credentials, no quorum,
	// or connecting took longer than the connect timeout). When time ran
	// out or the context ended, the error also wraps
	// context.DeadlineExceeded or the context's error.
	ErrUnavailable = errors.New("dlock: backend unavailable")
)

// Error is a failure of one operation on one key. It wraps the cause once, so
// errors.Is and errors.As reach both dlock's sentinels and the backend client's
// own error types.
type Error struct {
	// Op is the operation: "lock", "trylock", "rlock", "tryrlock", "extend",
	// "unlock" or "renew", a semaphore's "tryacquire", or an election's
	// "resign" or "leader".
	Op string
	// Key is the lock's name.
	Key string
	// Err is the cause.
	Err error
}

// Error returns "dlock: OP "KEY": CAUSE".
func (e *Error) Error() string {
	return fmt.Sprintf("dlock: %s %q: %v", e.Op, e.Key, e.Err)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// wrapErr normalises an error of operation op on key: nil stays nil, a call
// whose context ended returns exactly ctx.Err(), and anything else is wrapped
// once in an *Error.
func wrapErr(ctx context.Context, op, key string, err error) error {
	if err == nil {
		return nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return ctxErr
	}
	if e, ok := errors.AsType[*Error](err); ok && e.Key == key {
		return err
	}
	return &Error{Op: op, Key: key, Err: err}
}

// lostError is the error a lost lease reports: it satisfies errors.Is with
// ErrLockLost and with the reason.
func lostError(reason error) error {
	return fmt.Errorf("%w: %w", ErrLockLost, reason)
}
