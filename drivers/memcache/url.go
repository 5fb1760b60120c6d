package memcache

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
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

// open is the dlock.OpenFunc of both schemes: it makes a gomemcache client
// from u, checks that every server answers, and returns a Driver that owns
// the client.
func open(ctx context.Context, u *url.URL) (driver.Driver, error) {
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
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// A wrong address should fail here, where the caller expects
	// configuration errors, not at the first Lock. gomemcache's Ping takes
	// no context: each server's answer is bounded by the Timeout.
	if err := client.Ping(); err != nil {
		_ = client.Close()
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, fmt.Errorf("memcached: %s: %w", u.Redacted(), err)
	}
	return newDriver(client, true, cfg.opts), nil
}

// parseURL checks u and turns it into the client's settings and the
// driver's options. Its errors wrap dlock.ErrInvalidURL.
func parseURL(u *url.URL) (config, error) {
	cfg := config{timeout: DefaultTimeout, maxIdle: DefaultMaxIdleConns, opts: defaultOptions()}
	bad := func(format string, args ...any) (config, error) {
		return config{}, fmt.Errorf("%w: %s: %s", dlock.ErrInvalidURL, u.Redacted(), fmt.Sprintf(format, args...))
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
	for part := range strings.SplitSeq(u.Host, ",") {
		server, err := parseServer(part)
		if err != nil {
			return bad("server %q: %v", part, err)
		}
		if slices.Contains(cfg.servers, server) {
			return bad("server %s listed twice", server)
		}
		cfg.servers = append(cfg.servers, server)
	}
	if len(cfg.servers) > maxURLServers {
		return bad("%d servers, the limit is %d", len(cfg.servers), maxURLServers)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return bad("query: %v", err)
	}
	for name, vs := range q {
		if len(vs) != 1 {
			return bad("%s given %d times", name, len(vs))
		}
		v := vs[0]
		switch name {
		case timeoutParam:
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return bad("%s=%q: want a positive duration such as 500ms", name, v)
			}
			cfg.timeout = d
		case maxIdleParam:
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 1024 {
				return bad("%s=%q: want a number from 1 to 1024", name, v)
			}
			cfg.maxIdle = n
		case prefixParam:
			if err := checkPrefix(v); err != nil {
				return bad("%s: %v", name, err)
			}
			cfg.opts.prefix = v
		default:
			return bad("unknown parameter %q (known: %s, %s, %s)", name, timeoutParam, maxIdleParam, prefixParam)
		}
	}
	return cfg, nil
}

// parseServer checks one "host[:port]" of a URL and adds the default port.
// An IPv6 address must be in brackets; net/url accepts those only when the
// URL names a single server.
func parseServer(s string) (string, error) {
	if s == "" {
		return "", fmt.Errorf("empty host")
	}
	host, port := s, DefaultPort
	if strings.HasPrefix(s, "[") || strings.Count(s, ":") == 1 {
		if end := strings.LastIndexByte(s, ']'); !strings.HasPrefix(s, "[") || end != len(s)-1 {
			h, p, err := net.SplitHostPort(s)
			if err != nil {
				return "", err
			}
			host, port = h, p
		} else {
			host = s[1:end]
		}
	} else if strings.Contains(s, ":") {
		return "", fmt.Errorf("an IPv6 address must be in brackets, as in [::1]:11211")
	}
	if host == "" {
		return "", fmt.Errorf("empty host")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("port %q is not in 1 to 65535", port)
	}
	return net.JoinHostPort(host, port), nil
}
