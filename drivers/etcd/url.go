package etcd

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// Scheme is the URL scheme this package registers with dlock.Open:
// "etcd://host1:2379,host2:2379/prefix?ttl=15s".
const Scheme = "etcd"

// DefaultPort is the port of an endpoint given without one.
const DefaultPort = "2379"

// ttlParam is the query parameter that sets the session TTL.
const ttlParam = "ttl"

func init() {
	dlock.Register(Scheme, open)
}

// open is the dlock.OpenFunc of the scheme: it makes a clientv3 client from
// u, checks that the cluster answers a linearizable read, and returns a
// Driver that owns the client.
func open(ctx context.Context, u *url.URL) (driver.Driver, error) {
	cfg, o, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	// The client's own context lives as long as the client, but must end if
	// ctx ends while New still works: with a user name, New authenticates,
	// and waits for the cluster as long as that context lives.
	life, kill := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, kill)
	cfg.Context = life
	cli, err := clientv3.New(cfg)
	if !stop() {
		if err == nil {
			_ = cli.Close()
		}
		return nil, ctx.Err()
	}
	if err != nil {
		kill()
		return nil, fmt.Errorf("etcd: %s: %w", displayURL(u), err)
	}
	// A wrong address should fail here, where the caller expects
	// configuration errors, not at the first Lock. A linearizable read needs
	// a leader, so this also checks that the cluster has a quorum.
	if _, err := cli.Get(ctx, o.prefix+"/", clientv3.WithCountOnly()); err != nil {
		_ = cli.Close()
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, fmt.Errorf("etcd: %s: %w", displayURL(u), err)
	}
	return newDriver(cli, true, o), nil
}

// parseURL checks u and turns it into a clientv3 configuration and the
// driver's own options. Its errors wrap dlock.ErrInvalidURL and never contain
// the password.
func parseURL(u *url.URL) (clientv3.Config, options, error) {
	o := defaultOptions()
	var cfg clientv3.Config
	bad := func(format string, args ...any) (clientv3.Config, options, error) {
		return cfg, o, fmt.Errorf("%w: %s: %s", dlock.ErrInvalidURL, displayURL(u), fmt.Sprintf(format, args...))
	}
	if !strings.EqualFold(u.Scheme, Scheme) {
		return bad("scheme %q: want %s://", u.Scheme, Scheme)
	}
	if u.Opaque != "" || u.Host == "" {
		return bad("want %s://[user:password@]host[:port][,host[:port]...][/prefix][?ttl=15s]", Scheme)
	}
	if u.Fragment != "" {
		return bad("a fragment (#...) means nothing here")
	}
	for _, ep := range strings.Split(u.Host, ",") {
		hostport, err := endpoint(ep)
		if err != nil {
			return bad("endpoint %q: %v", ep, err)
		}
		cfg.Endpoints = append(cfg.Endpoints, hostport)
	}
	if u.User != nil {
		cfg.Username = u.User.Username()
		cfg.Password, _ = u.User.Password()
		if cfg.Username == "" {
			return bad("a password needs a user name")
		}
	}
	if p := strings.TrimPrefix(u.Path, "/"); p != "" {
		if err := checkPrefix(p); err != nil {
			return bad("prefix: %v", err)
		}
		o.prefix = p
	}
	for name, vs := range u.Query() {
		if name != ttlParam {
			return bad("unknown parameter %q (the only one is %s)", name, ttlParam)
		}
		if len(vs) != 1 {
			return bad("%s given %d times", ttlParam, len(vs))
		}
		ttl, err := time.ParseDuration(vs[0])
		if err != nil {
			return bad("%s: %v", ttlParam, err)
		}
		if err := checkSessionTTL(ttl); err != nil {
			return bad("%s: %v", ttlParam, err)
		}
		o.ttl = ttl
	}
	// Keepalive pings find a connection that died silently (no reset) in
	// seconds rather than TCP's minutes; etcd accepts pings every 5 s.
	cfg.DialKeepAliveTime = 5 * time.Second
	cfg.DialKeepAliveTimeout = 3 * time.Second
	// A library must not write to the process's stderr; errors reach the
	// caller through dlock's.
	cfg.Logger = zap.NewNop()
	return cfg, o, nil
}

// endpoint checks one "host[:port]" of the URL and returns "host:port".
func endpoint(ep string) (string, error) {
	if ep == "" {
		return "", fmt.Errorf("empty")
	}
	host, port := ep, DefaultPort
	switch {
	case strings.HasPrefix(ep, "["):
		end := strings.IndexByte(ep, ']')
		if end < 0 {
			return "", fmt.Errorf("unterminated IPv6 address")
		}
		host = ep[1:end]
		if rest := ep[end+1:]; rest != "" {
			p, ok := strings.CutPrefix(rest, ":")
			if !ok {
				return "", fmt.Errorf("unexpected %q after the IPv6 address", rest)
			}
			port = p
		}
		if net.ParseIP(host) == nil {
			return "", fmt.Errorf("%q is not an IPv6 address", host)
		}
	case strings.Count(ep, ":") > 1:
		return "", fmt.Errorf("an IPv6 address must be in brackets, as in [::1]:2379")
	case strings.Contains(ep, ":"):
		host, port, _ = strings.Cut(ep, ":")
	}
	if host == "" {
		return "", fmt.Errorf("no host")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("port %q is not in 1 to 65535", port)
	}
	return net.JoinHostPort(host, port), nil
}

// displayURL is u for error messages: password redacted, and the query and
// fragment left out.
func displayURL(u *url.URL) string {
	if u.Opaque != "" {
		return u.Scheme + ":..."
	}
	v := *u
	v.RawQuery = ""
	v.ForceQuery = false
	v.Fragment = ""
	v.RawFragment = ""
	return v.Redacted()
}
