package zookeeper

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// Scheme is the URL scheme this package registers with dlock.Open:
// "zk://host1:2181,host2:2181/base?session_timeout=10s".
const Scheme = "zk"

// sessionTimeoutParam is the URL's one query parameter.
const sessionTimeoutParam = "session_timeout"

func init() {
	dlock.Register(Scheme, open)
}

// open is the dlock.OpenFunc of the scheme: it dials the ensemble and waits
// for a session, bounded by ctx.
func open(ctx context.Context, u *url.URL) (driver.Driver, error) {
	servers, opts, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	d, err := Dial(ctx, servers, opts...)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// parseURL checks u and turns it into a server list and options. Its errors
// wrap dlock.ErrInvalidURL.
func parseURL(u *url.URL) ([]string, []Option, error) {
	bad := func(format string, args ...any) ([]string, []Option, error) {
		return nil, nil, fmt.Errorf("%w: %s://%s: %s", dlock.ErrInvalidURL, u.Scheme, u.Host, fmt.Sprintf(format, args...))
	}
	if !strings.EqualFold(u.Scheme, Scheme) {
		return bad("scheme %q: want %s://", u.Scheme, Scheme)
	}
	if u.Opaque != "" {
		return bad("want %s://host[:port][,host[:port]...][/base]", Scheme)
	}
	if u.User != nil {
		return bad("user information is not supported (ZooKeeper authentication is the connection's: use New with a connection that called AddAuth)")
	}
	if u.Fragment != "" {
		return bad("unexpected fragment %q", u.Fragment)
	}
	if u.Host == "" {
		return bad("no server")
	}
	var servers []string
	for _, hp := range strings.Split(u.Host, ",") {
		s, err := parseServer(hp)
		if err != nil {
			return bad("%v", err)
		}
		servers = append(servers, s)
	}
	var opts []Option
	if p := u.Path; p != "" && p != "/" {
		if err := checkBase(p); err != nil {
			return bad("%v", err)
		}
		opts = append(opts, WithBasePath(p))
	}
	for name, values := range u.Query() {
		if name != sessionTimeoutParam {
			return bad("unknown parameter %q (the only one is %s)", name, sessionTimeoutParam)
		}
		if len(values) != 1 {
			return bad("%s given %d times", name, len(values))
		}
		t, err := time.ParseDuration(values[0])
		if err != nil {
			return bad("%s: %v", name, err)
		}
		opt := WithSessionTimeout(t)
		if err := opt(&options{}); err != nil {
			return bad("%s: %v", name, err)
		}
		opts = append(opts, opt)
	}
	return servers, opts, nil
}

// parseServer checks one "host[:port]" of the URL and adds the default port.
func parseServer(hp string) (string, error) {
	if hp == "" {
		return "", fmt.Errorf("empty server in the list")
	}
	host, port := hp, "2181"
	switch {
	case strings.HasPrefix(hp, "["):
		end := strings.IndexByte(hp, ']')
		if end < 0 {
			return "", fmt.Errorf("server %q: unclosed '['", hp)
		}
		host = hp[1:end]
		rest := hp[end+1:]
		if rest != "" {
			if rest[0] != ':' {
				return "", fmt.Errorf("server %q: unexpected %q after ']'", hp, rest)
			}
			port = rest[1:]
		}
	case strings.Count(hp, ":") > 1:
		return "", fmt.Errorf("server %q: an IPv6 address must be in brackets, as in [::1]:2181", hp)
	case strings.Contains(hp, ":"):
		host, port, _ = strings.Cut(hp, ":")
	}
	if host == "" {
		return "", fmt.Errorf("server %q has no host", hp)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("server %q: port %q is not in 1 to 65535", hp, port)
	}
	return net.JoinHostPort(host, port), nil
}
