package urlparams

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// ConnectTimeoutParam is the query parameter that bounds dlock.Open's
// connecting: the same name on every backend (see
// dlock.DefaultConnectTimeout).
const ConnectTimeoutParam = "connect_timeout"

// ConnectFunc is a driver's connection to the backend a URL names: u is the
// URL without its connect_timeout parameter, and timeout that parameter's
// value, or 0 when the URL has none (for the drivers whose client library
// bounds each dial as well). It must return when ctx ends, closing whatever
// it started.
type ConnectFunc func(ctx context.Context, u *url.URL, timeout time.Duration) (driver.Driver, error)

// Opener returns the dlock.OpenFunc of a driver whose connection to the
// backend is connect: see [Connect].
func Opener(connect ConnectFunc) dlock.OpenFunc {
	return func(ctx context.Context, u *url.URL) (driver.Driver, error) {
		return Connect(ctx, u, connect)
	}
}

// Parsed returns the ConnectFunc of a driver that parses the URL before it
// connects: parse turns the URL into the client library's configuration
// and the driver's options, with errors that wrap dlock.ErrInvalidURL;
// connect gets them, the URL (for its messages) and the connect_timeout
// value (as a ConnectFunc does), and runs only when parse succeeds.
func Parsed[C, O any](
	parse func(u *url.URL) (C, O, error),
	connect func(ctx context.Context, u *url.URL, cfg C, opts O, timeout time.Duration) (driver.Driver, error),
) ConnectFunc {
	return func(ctx context.Context, u *url.URL, timeout time.Duration) (driver.Driver, error) {
		cfg, opts, err := parse(u)
		if err != nil {
			return nil, err
		}
		return connect(ctx, u, cfg, opts, timeout)
	}
}

// Connect is what a driver's dlock.OpenFunc does (see [Opener]): it takes the
// connect_timeout parameter out of u, bounds ctx by it (or by
// dlock.DefaultConnectTimeout when ctx has no deadline and u no parameter),
// and runs connect. Its errors have the one shape dlock.Open documents:
// a bad parameter wraps dlock.ErrInvalidURL; a failure to connect wraps
// dlock.ErrUnavailable, with context.DeadlineExceeded when the timeout ran
// out and ctx's error when ctx ended first.
func Connect(ctx context.Context, u *url.URL, connect ConnectFunc) (driver.Driver, error) {
	rest, timeout, err := takeConnectTimeout(u)
	if err != nil {
		return nil, err
	}
	limit := timeout
	if _, ok := ctx.Deadline(); !ok && limit == 0 {
		limit = dlock.DefaultConnectTimeout
	}
	bounded := ctx
	if limit > 0 {
		var cancel context.CancelFunc
		bounded, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	d, err := connect(bounded, rest, timeout)
	switch {
	case err == nil:
		return d, nil
	case errors.Is(err, dlock.ErrInvalidURL), errors.Is(err, dlock.ErrInvalidOption), errors.Is(err, dlock.ErrInvalidTTL):
		return nil, err
	case ctx.Err() != nil:
		return nil, fmt.Errorf("%w: connecting to %s: %w", dlock.ErrUnavailable, Display(u), ctx.Err())
	case bounded.Err() != nil:
		// The driver's own error says no more than that time ran out, in
		// its client library's words.
		return nil, fmt.Errorf("%w: connecting to %s timed out after %v: %w", dlock.ErrUnavailable, Display(u), limit, context.DeadlineExceeded)
	case timedOut(err):
		// A client library's own bound, such as a read deadline, ran out
		// first: the same failure, in the same shape.
		return nil, fmt.Errorf("%w: connecting timed out: %w: %w", dlock.ErrUnavailable, err, context.DeadlineExceeded)
	}
	return nil, fmt.Errorf("%w: %w", dlock.ErrUnavailable, err)
}

// timedOut reports whether err says that time ran out: a context's
// deadline, a connection's deadline, or a network timeout.
func timedOut(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	ne, ok := errors.AsType[net.Error](err)
	return ok && ne.Timeout()
}

// takeConnectTimeout returns a copy of u without its connect_timeout
// parameter, and the parameter's value (0 when u has none). A value is a
// positive Go duration ("1500ms", "10s") or, as libpq spells it, a positive
// whole number of seconds.
func takeConnectTimeout(u *url.URL) (*url.URL, time.Duration, error) {
	if u.Opaque != "" || u.RawQuery == "" {
		return u, 0, nil
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, 0, Invalid(u, "query: %v", err)
	}
	v, ok, err := Take(q, ConnectTimeoutParam)
	if err != nil {
		return nil, 0, Invalid(u, "%v", err)
	}
	if !ok {
		return u, 0, nil
	}
	d, err := time.ParseDuration(v)
	if n, nerr := strconv.Atoi(v); err != nil && nerr == nil && n > 0 && n <= math.MaxInt32 {
		d, err = time.Duration(n)*time.Second, nil
	}
	if err != nil || d <= 0 {
		return nil, 0, Invalid(u, "%s=%q: want a positive duration such as 10s", ConnectTimeoutParam, v)
	}
	rest := *u
	rest.RawQuery = q.Encode()
	return &rest, d, nil
}
