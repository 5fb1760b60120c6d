package memcache

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	gomemcache "github.com/bradfitz/gomemcache/memcache"
)

// gomemcache has no contexts and no retries of its own; this file is how the
// driver bounds and repeats its requests.

// call runs op, a single memcached request, and runs it again while it fails
// on a connection that turns out to be dead, up to d.attempts times in all.
// gomemcache keeps idle connections in a pool and only finds one dead (the
// server restarted, or closed it as idle) when a request on it fails at
// once, so after a restart every pooled connection fails one request; the
// next attempt dials a new one.
//
// again reports whether an earlier attempt failed that way: the server may
// then have run it (a connection can break after the request went out), and
// every caller is written so that running its request twice is harmless or
// detected: a second add of the lock item finds it held by the same request
// ID, a second cas finds the CAS unique changed and re-reads the item, and a
// second incr only skips a fencing token.
func (d *Driver) call(op func() error) (again bool, err error) {
	for attempt := 1; ; attempt++ {
		err = op()
		if err == nil || !deadConn(err) || attempt >= d.attempts {
			return attempt > 1, err
		}
	}
}

// deadConn reports whether err is the failure of a request on a connection
// that the server (or the network) had closed: not a timeout, which would
// only repeat itself, and not a refused dial, which means no server.
func deadConn(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, net.ErrClosed)
}

// mayHaveApplied reports whether a request that failed with err may still
// have run on the server. Only failures known to come before the request
// was sent, or answers from the server itself, say it did not.
func mayHaveApplied(err error) bool {
	var opErr *net.OpError
	var connectTimeout *gomemcache.ConnectTimeoutError
	switch {
	case errors.Is(err, gomemcache.ErrCacheMiss), errors.Is(err, gomemcache.ErrNotStored),
		errors.Is(err, gomemcache.ErrCASConflict), errors.Is(err, gomemcache.ErrMalformedKey),
		errors.Is(err, gomemcache.ErrNoServers):
		return false
	case errors.As(err, &connectTimeout), errors.As(err, &opErr) && opErr.Op == "dial":
		return false // no connection, so nothing was sent
	case serverReplied(err):
		return false
	}
	return true
}

// serverReplied reports whether err is gomemcache's report of an error line
// the server sent (SERVER_ERROR out of memory, CLIENT_ERROR ...): the server
// read the request and refused it. gomemcache has no type for these, only
// messages.
func serverReplied(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "memcache: unexpected response line") ||
		strings.HasPrefix(msg, "memcache: client error:")
}

// async runs op, which may take several requests, so that the caller gets
// ctx's error as soon as ctx ends: gomemcache bounds each request by its
// client's Timeout, not by a context. op goes on in the background then, as
// an in-flight operation that Close waits for; its outcome is unknown to the
// caller, which is what a context error means. Used by Extend and Release,
// whose ops are owner-checked and harmless to finish late; Acquire runs
// synchronously, as it must give back a grant that arrives after ctx ended.
func (d *Driver) async(ctx context.Context, op func() error) error {
	return d.asyncAfter(ctx, nil, func(bool) error { return op() })
}

// asyncAfter is async for an operation that may be settled first by a step
// that ctx bounds itself (a meta round on the driver's own connections,
// metacas.go): first runs at once on the caller's goroutine, and when it
// settles the outcome (handled) its error is the result, with no goroutine
// started, which an uncontended Release would otherwise pay on every call
// (the core bounds each Release by a context that can end). Otherwise op
// runs as async runs it, told by maybeApplied that first may have taken
// effect. first is also how a ctx that ended during it is ridden: it
// reports the outcome unknown, and op, which finishes in the background
// when ctx has ended, settles it. A nil first settles nothing.
func (d *Driver) asyncAfter(ctx context.Context, first func(ctx context.Context) (handled, maybeApplied bool, err error), op func(maybeApplied bool) error) error {
	done, err := d.enter(ctx)
	if err != nil {
		return err
	}
	maybeApplied := false
	if first != nil {
		var handled bool
		if handled, maybeApplied, err = first(ctx); handled {
			done()
			return err
		}
	}
	if ctx.Done() == nil {
		defer done()
		return op(maybeApplied)
	}
	result := make(chan error, 1)
	go func() {
		defer done()
		result <- op(maybeApplied)
	}()
	select {
	case err := <-result:
		return err
	case <-ctx.Done():
		select {
		case err := <-result: // finished as well: its outcome is known
			return err
		default:
			return ctx.Err()
		}
	}
}
