package zookeeper

import (
	"context"
	"errors"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/driver"
)

// answered reports whether err is the server's definite answer to a request
// (the request was refused, and changed nothing), as opposed to a failure to
// hear from the server.
func answered(err error) bool {
	for _, e := range []error{
		zk.ErrNoNode, zk.ErrNodeExists, zk.ErrBadVersion, zk.ErrNotEmpty, zk.ErrNoAuth,
		zk.ErrInvalidACL, zk.ErrInvalidFlags, zk.ErrNoChildrenForEphemerals, zk.ErrInvalidPath,
		zk.ErrBadArguments, zk.ErrAPIError, zk.ErrAuthFailed, zk.ErrUnknown,
		driver.ErrNotHeld, driver.ErrLocked, errVanished,
	} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// unsent reports whether err says the request never reached a server that
// could apply it for the session (it was dropped from the send queue, or the
// session is gone, and its ephemeral nodes with it).
func unsent(err error) bool {
	return errors.Is(err, zk.ErrNoServer) || errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, zk.ErrClosing)
}

// stopped reports whether err says the caller's context ended or the Driver
// was closed.
func stopped(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, driver.ErrClosed)
}

// transient reports whether err is a connection failure that waiting for the
// session to come back may cure.
func transient(err error) bool {
	return err != nil && !answered(err) && !stopped(err)
}
