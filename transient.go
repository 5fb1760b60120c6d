package dlock

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
)

// Riding out outages: a Lock or RLock that waits keeps waiting through the
// errors a backend gives while it restarts, fails over or is paused, and
// returns only when its context ends, the Client closes, the lock is
// granted, or an attempt fails for a reason that waiting cannot cure.
// WithFailFast turns this off. TryLock and TryRLock never wait, so they
// return every error at once.
//
// An error is transient when the backend could not be reached or did not
// answer, which a restart or pause explains and time may mend:
//   - the backend did not answer in time: a net.Error whose Timeout reports
//     true (an i/o timeout), or context.DeadlineExceeded while the caller's
//     context is still live (the driver's or the client library's own
//     per-call timeout);
//   - the connection broke or could not be made: io.EOF,
//     io.ErrUnexpectedEOF, net.ErrClosed, connection refused, reset or
//     aborted, a broken pipe, a host or network unreachable or down
//     (syscall errnos, matched with errors.Is through *net.OpError and
//     *os.SyscallError), or a name that does not resolve for now
//     (*net.DNSError: a restarting container's name disappears from its
//     network's DNS meanwhile);
//   - an error anywhere in the chain that says so, with a method
//     Transient() bool returning true: how a driver marks a backend's own
//     "not ready yet" replies (a server loading its data, a database
//     starting up or shutting down, a cluster electing a leader).
//
// Every other error is permanent and returned at once, among them: bad
// input (ErrInvalidKey, ErrInvalidTTL, ErrInvalidOption), an unsupported
// request (errors.ErrUnsupported), ErrClosed (the driver was closed), the
// caller's own context ending, and any reply the backend gave to refuse the
// request: a wrong password, a missing permission, a protocol or TLS
// failure. A Lock therefore never waits silently on a misconfiguration that
// the backend reports; one that looks like an outage from the client's side
// (a wrong address, where every connection is refused) is waited through
// like an outage, and each failed attempt is logged at Warn and counted in
// dlock.acquire.errors, so that it shows.
//
// An attempt that failed may still have been applied by the backend (the
// connection broke after the request went out). Each retry is a new request
// with a new ID, and the grant of the failed one is the driver's to give
// back: drivers release by request ID whatever a request whose outcome is
// unknown may have taken (package driver), and the core never drops a grant
// it received.

// transientMarker is how an error declares itself transient; no dlock
// package needs to be imported to implement it.
type transientMarker interface {
	error
	Transient() bool
}

// brokenConnection lists the system errors of a connection that broke or
// could not be made.
var brokenConnection = []error{
	io.EOF, io.ErrUnexpectedEOF, net.ErrClosed,
	syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE,
	syscall.ETIMEDOUT, syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.EHOSTDOWN, syscall.ENETDOWN,
}

// transient reports whether err, from an acquisition attempt made under
// ctx, is one a waiting Lock rides out (see above). It is false once ctx
// has ended, whatever err is: the caller gave up, or the Client closed.
func transient(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil {
		return false
	}
	switch {
	case errors.Is(err, ErrClosed), errors.Is(err, ErrInvalidKey), errors.Is(err, ErrInvalidTTL),
		errors.Is(err, ErrInvalidOption), errors.Is(err, errors.ErrUnsupported),
		errors.Is(err, ErrLocked), errors.Is(err, ErrNotHeld), errors.Is(err, context.Canceled):
		return false
	case errors.Is(err, context.DeadlineExceeded):
		return true
	}
	if m, ok := errors.AsType[transientMarker](err); ok {
		return m.Transient()
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return true
	}
	if _, ok := errors.AsType[*net.DNSError](err); ok {
		return true
	}
	for _, target := range brokenConnection {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
