package dlock

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
)

// Riding out outages: a waiting Lock or RLock keeps trying through
// transient errors (see Outages in the package documentation, which lists
// them; WithFailFast turns this off). transient below is that list.

// transientMarker is how an error declares itself transient; no dlock
// package needs to be imported to implement it.
type transientMarker interface {
	error
	Transient() bool
}

// sqlStater is an SQL database's error with its SQLSTATE code, as pgx's
// and lib/pq's errors carry it.
type sqlStater interface {
	error
	SQLState() string
}

// unavailableSQLState reports whether an SQLSTATE code says the server is
// unavailable for now: a connection exception (class 08), or a server
// shutting down or starting up (57P01 admin_shutdown, 57P02 crash_shutdown,
// 57P03 cannot_connect_now), as during a restart. Every other code (a
// wrong password is 28P01, a missing permission 42501) is permanent.
func unavailableSQLState(code string) bool {
	switch code {
	case "57P01", "57P02", "57P03":
		return true
	}
	return len(code) == 5 && code[:2] == "08"
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
	if s, ok := errors.AsType[sqlStater](err); ok {
		return unavailableSQLState(s.SQLState())
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
