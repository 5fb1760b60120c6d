package memcache

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/urlparams"
)

// The URL schemes this package registers with dlock.Open; they mean the same.
const (
	// Scheme is "memcache://host:port[,host:port...]".
	Scheme = "memcache"
	// SchemeAlias is "memcached://...", the same driver.
	SchemeAlias = "memcached"
)

// DefaultPort is the port of a server given without one.
const DefaultPort = "11211"

// Defaults of the gomemcache client that dlock.Open makes.
const (
	// DefaultTimeout bounds each request: gomemcache's own default.
	DefaultTimeout = gomemcache.DefaultTimeout
	// DefaultMaxIdleConns is how many idle connections per server the
	// client keeps: more than gomemcache's 2, since every goroutine that
	// locks or renews at the same time needs one.
	DefaultMaxIdleConns = 8
)

// The query parameters of a URL.
const (
	timeoutParam  = "timeout"
	maxIdleParam  = "max_idle_conns"
	prefixParam   = "key_prefix"
	maxURLServers = 64
)

func init() {
	dlock.Register(Scheme, open)
	dlock.Register(SchemeAlias, open)
}

// config is what a URL says.
type config struct {
	servers []string // host:port, in the URL's order
	timeout time.Duration
	maxIdle int
	opts    options
}

// open is the dlock.OpenFunc of the URL scheme(s) this package registers.
var open = urlparams.Opener(connect)

// connect opens both schemes (see urlparams.Opener): it makes a gomemcache
// client from u, checks that every server answers, and returns a Driver
// that owns the client.
func connect(ctx context.Context, u *url.URL, _ time.Duration) (driver.Driver, error) {
	cfg, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	// SetServers resolves host names now, once; gomemcache.New would ignore
	// a failure and leave the client without servers.
	var servers gomemcache.ServerList
	if err := servers.SetServers(cfg.servers...); err != nil {
		return nil, fmt.Errorf("memcached: %s: resolve servers: %w", u.Redacted(), err)
	}
	client := gomemcache.NewFromSelector(&servers)
	client.Timeout = cfg.timeout
	client.MaxIdleConns = cfg.maxIdle
	// A wrong address should fail here, where the caller expects
	// configuration errors, not at the first Lock.
	if err := ping(ctx, client); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, fmt.Errorf("memcached: %s: %w", u.Redacted(), err)
	}
	opts := cfg.opts
	opts.selector = &servers
	return newDriver(client, true, opts), nil
}

// ping checks that every server of client answers, and closes client when
// one does not or ctx ends first. gomemcache's Ping takes no context and
// asks the servers one after the other, each bounded by the client's
// Timeout: it runs in its own goroutine, which outlives an early return
// by at most that long per server, and closes the client when it ends.
func ping(ctx context.Context, client *gomemcache.Client) error {
	if err := ctx.Err(); err != nil {
		_ = client.Close()
		return err
	}
	done := make(chan error, 1)
	go func() {
		err := client.Ping()
		if _, ok := errors.AsType[*gomemcache.ConnectTimeoutError](err); ok {
			// gomemcache's own timeout error says nothing of the kind to
			// errors.Is: make it a timeout, as dlock.Open documents.
			err = fmt.Errorf("%w: %w", err, context.DeadlineExceeded)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			_ = client.Close()
		}
		return err
	case <-ctx.Done():
		go func() {
			<-done
			_ = client.Close()
		}()
		return ctx.Err()
	}
}

// parseURL checks u and turns it into the client's settings and the
// driver's options. Its errors wrap dlock.ErrInvalidURL.
func parseURL(u *url.URL) (config, error) {
	cfg := config{timeout: DefaultTimeout, maxIdle: DefaultMaxIdleConns, opts: defaultOptions()}
	bad := func(format string, args ...any) (config, error) {
		return config{}, urlparams.Invalid(u, format, args...)
	}
	scheme := strings.ToLower(u.Scheme)
	switch {
	case scheme != Scheme && scheme != SchemeAlias:
		return bad("scheme %q: want %s:// or %s://", u.Scheme, Scheme, SchemeAlias)
	case u.Opaque != "":
		return bad("want %s://host[:port][,host[:port]...]", scheme)
	case u.User != nil:
		return bad("memcached's text protocol has no authentication: remove the user information")
	case u.Path != "" && u.Path != "/":
		return bad("unexpected path %q: the URL names servers only", u.Path)
	case u.Fragment != "":
		return bad("unexpected fragment %q", u.Fragment)
	case u.Host == "":
		return bad("no server: want %s://host[:port][,host[:port]...]", scheme)
	}
	servers, err := urlparams.Hosts(u.Host, DefaultPort)
	if err != nil {
		return bad("server %v", err)
	}
	for i, server := range servers {
		if slices.Contains(servers[:i], server) {
			return bad("server %s listed twice", server)
		}
	}
	if len(servers) > maxURLServers {
		return bad("%d servers, the limit is %d", len(servers), maxURLServers)
	}
	cfg.servers = servers
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return bad("query: %v", err)
	}
	if v, ok, err := urlparams.Take(q, timeoutParam); err != nil {
		return bad("%v", err)
	} else if ok {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return bad("%s=%q: want a positive duration such as 500ms", timeoutParam, v)
		}
		cfg.timeout = d
	}
	if v, ok, err := urlparams.Take(q, maxIdleParam); err != nil {
		return bad("%v", err)
	} else if ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1024 {
			return bad("%s=%q: want a number from 1 to 1024", maxIdleParam, v)
		}
		cfg.maxIdle = n
	}
	if v, ok, err := urlparams.Take(q, prefixParam); err != nil {
		return bad("%v", err)
	} else if ok {
		if err := checkPrefix(v); err != nil {
			return bad("%s: %v", prefixParam, err)
		}
		cfg.opts.prefix = v
	}
	if err := urlparams.Unknown(q, timeoutParam, maxIdleParam, prefixParam); err != nil {
		return bad("%v", err)
	}
	return cfg, nil
}
