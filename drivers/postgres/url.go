package postgres

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/urlparams"
)

// The URL schemes this package registers with dlock.Open. Both mean the
// same; pgx parses the rest of the URL.
const (
	Scheme    = "postgres"
	SchemeAlt = "postgresql"
)

// The query parameters the driver takes for itself; pgx takes the others
// (and passes those it does not know to the server as settings).
const (
	paramMaxConns    = "dlock_max_conns"
	paramMaxIdleTime = "dlock_max_idle_time"
	paramSchema      = "dlock_schema"
)

// TCP keep-alive of the connections the driver dials itself: a server that
// vanished without closing the connection is noticed by a waiting Lock (and
// by a held lock between heartbeats) within about 10 + 3 × 5 = 25 s.
var keepAlive = net.KeepAliveConfig{Enable: true, Idle: 10 * time.Second, Interval: 5 * time.Second, Count: 3}

func init() {
	dlock.Register(Scheme, open)
	dlock.Register(SchemeAlt, open)
}

// open is the dlock.OpenFunc of the URL scheme(s) this package registers.
var open = urlparams.Opener(urlparams.Parsed(parseURL, connect))

// connect makes a Driver that dials its own connections, and connects once,
// bounded by ctx, so that a wrong address, password or database, or missing
// privileges for the migration, fail here. A connect_timeout, which libpq
// spells the same, also bounds each later dial, as it would in libpq.
func connect(ctx context.Context, u *url.URL, cfg *pgconn.Config, opts []Option, timeout time.Duration) (driver.Driver, error) {
	if timeout > 0 {
		cfg.ConnectTimeout = timeout
	}
	d, err := newDriver(func(ctx context.Context) (*pgconn.PgConn, error) {
		return pgconn.ConnectConfig(ctx, cfg)
	}, opts)
	if err != nil {
		return nil, err
	}
	s, err := d.sessions.get(ctx, true)
	if err != nil {
		_ = d.Close()
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, fmt.Errorf("postgres: %s: %w", urlparams.Display(u), redact(u, err))
	}
	d.sessions.put(s)
	return d, nil
}

// redactedError is an error whose message had the password taken out; it
// still unwraps to the original, for errors.Is and errors.As.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redact returns err with every occurrence of u's password in its message
// replaced, in case a library quotes the connection string.
func redact(u *url.URL, err error) error {
	p, ok := u.User.Password()
	if !ok || p == "" || !strings.Contains(err.Error(), p) {
		return err
	}
	return &redactedError{msg: strings.ReplaceAll(err.Error(), p, "xxxxx"), err: err}
}

// parseURL checks u and turns it into a pgconn config and the driver's own
// options. Its errors wrap dlock.ErrInvalidURL and never contain the
// password.
func parseURL(u *url.URL) (*pgconn.Config, []Option, error) {
	bad := func(format string, args ...any) (*pgconn.Config, []Option, error) {
		return nil, nil, urlparams.Invalid(u, format, args...)
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != Scheme && scheme != SchemeAlt {
		return bad("scheme %q: want %s:// or %s://", u.Scheme, Scheme, SchemeAlt)
	}
	if u.Opaque != "" {
		return bad("want %s://[user[:password]@][host][:port][/database][?param=value&...]", scheme)
	}
	q := u.Query()
	var opts []Option
	if v, ok, err := urlparams.Take(q, paramMaxConns); err != nil {
		return bad("%v", err)
	} else if ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return bad("%s=%q: want a whole number of at least 1", paramMaxConns, v)
		}
		opts = append(opts, WithMaxConns(n))
	}
	if v, ok, err := urlparams.Take(q, paramMaxIdleTime); err != nil {
		return bad("%v", err)
	} else if ok {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return bad("%s=%q: want a positive duration such as 5m", paramMaxIdleTime, v)
		}
		opts = append(opts, WithMaxIdleTime(d))
	}
	if v, ok, err := urlparams.Take(q, paramSchema); err != nil {
		return bad("%v", err)
	} else if ok {
		if v == "" {
			return bad("%s is empty", paramSchema)
		}
		opts = append(opts, WithSchema(v))
	}
	rest := *u
	rest.Scheme = scheme
	rest.RawQuery = q.Encode()
	cfg, err := pgconn.ParseConfig(rest.String())
	if err != nil {
		return bad("%v", err)
	}
	if _, ok := cfg.RuntimeParams["application_name"]; !ok {
		cfg.RuntimeParams["application_name"] = "dlock"
	}
	dialer := &net.Dialer{KeepAliveConfig: keepAlive}
	cfg.DialFunc = dialer.DialContext
	return cfg, opts, nil
}
