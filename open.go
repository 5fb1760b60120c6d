package dlock

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/schemes"
)

// OpenFunc makes a driver from a URL whose scheme it was registered for.
// Errors about the URL itself should wrap ErrInvalidURL; errors about
// reaching the backend should wrap ErrUnavailable (Open wraps those that do
// not). It must return when ctx ends, closing whatever it started, and must
// take the connect_timeout query parameter as [DefaultConnectTimeout] says.
type OpenFunc func(ctx context.Context, u *url.URL) (driver.Driver, error)

// openers are the drivers' registrations for Open.
var openers = schemes.New[OpenFunc]("dlock")

// Register makes a driver available to Open under a URL scheme. Drivers call
// it from init, so that a blank import of the driver package is enough.
// Register panics when open is nil or the scheme is already registered, as two
// drivers claiming one scheme is a programming error.
func Register(scheme string, open OpenFunc) {
	if open == nil {
		panic("dlock: Register of a nil OpenFunc for scheme " + scheme)
	}
	openers.Register(scheme, open)
}

// Schemes returns the registered URL schemes, sorted.
func Schemes() []string { return openers.Schemes() }

// DefaultConnectTimeout bounds how long Open may take to connect when its
// context has no deadline: a backend that is down, or a port where
// something accepts connections and never answers, fails Open in this time
// instead of hanging it. The URL parameter connect_timeout (the same on
// every backend: a duration such as "2s", or a whole number of seconds as
// libpq spells it) sets another bound, which applies whether or not the
// context has a deadline (the earlier one wins).
const DefaultConnectTimeout = 10 * time.Second

// Open makes a Client from a URL whose scheme names a registered driver (for
// example "redis://localhost:6379/0" after importing
// github.com/dlock-go/dlock/drivers/redis). The Client owns the backend
// connection it opens and closes it on Close. Options set the defaults of
// every Mutex of the Client.
//
// Open connects before it returns, so that a wrong address or password
// fails here rather than at the first Lock; it gives up when ctx ends or
// the connect timeout (see [DefaultConnectTimeout]) runs out. A backend
// that goes away later is reported through the leases it had granted.
//
// Every error of Open wraps ErrInvalidURL (or ErrInvalidOption, or
// ErrInvalidTTL) when the URL or an option is wrong, and ErrUnavailable
// when the backend could not be reached or refused the connection; when
// the connect timeout ran out, it wraps context.DeadlineExceeded too, and
// when ctx ended first, ctx's error.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Error quotes the whole URL, password included: say only why.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return nil, fmt.Errorf("%w: %w", ErrInvalidURL, err)
	}
	if u.Scheme == "" {
		return nil, fmt.Errorf("%w: %q has no scheme; registered schemes: %s", ErrInvalidURL, rawURL, strings.Join(Schemes(), ", "))
	}
	open, ok := openers.Lookup(u.Scheme)
	if !ok {
		return nil, fmt.Errorf("%w: no driver registered for scheme %q (forgotten import?); registered schemes: %s",
			ErrInvalidURL, u.Scheme, strings.Join(Schemes(), ", "))
	}
	d, err := open(ctx, u)
	if err != nil {
		return nil, unavailable(ctx, u, err)
	}
	c, err := New(d, opts...)
	if err != nil {
		_ = d.Close()
		return nil, err
	}
	return c, nil
}

// unavailable returns err, a driver's failure to open u, wrapping
// ErrUnavailable unless it is about the configuration or says so already:
// the drivers of this module do, others need not.
func unavailable(ctx context.Context, u *url.URL, err error) error {
	for _, typed := range []error{ErrInvalidURL, ErrInvalidOption, ErrInvalidTTL, ErrUnavailable} {
		if errors.Is(err, typed) {
			return err
		}
	}
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		return fmt.Errorf("%w: %s: %w (%w)", ErrUnavailable, u.Scheme, err, ctxErr)
	}
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, u.Scheme, err)
}
