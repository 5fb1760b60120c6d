package zookeeper

import (
	"context"
	"net/url"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/urlparams"
)

// Scheme is the URL scheme this package registers with dlock.Open:
// "zk://host1:2181,host2:2181/base?session_ttl=10s".
const Scheme = "zk"

// DefaultPort is the port of a server given without one.
const DefaultPort = "2181"

// The URL's one query parameter, the session TTL, and its deprecated name.
const (
	sessionTTLParam = "session_ttl"
	oldSessionParam = "session_timeout"
)

func init() {
	dlock.Register(Scheme, open)
}

// open is the dlock.OpenFunc of the URL scheme(s) this package registers.
var open = urlparams.Opener(urlparams.Parsed(parseURL, connect))

// connect dials the ensemble and waits for a session, bounded by ctx: the
// client library retries its servers in the background for ever, so Dial
// closes it when ctx ends first.
func connect(ctx context.Context, u *url.URL, servers []string, opts []Option, _ time.Duration) (driver.Driver, error) {
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
		return nil, nil, urlparams.Invalid(u, format, args...)
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
	servers, err := urlparams.Hosts(u.Host, DefaultPort)
	if err != nil {
		return bad("server %v", err)
	}
	var opts []Option
	if p := u.Path; p != "" && p != "/" {
		if err := checkBase(p); err != nil {
			return bad("%v", err)
		}
		opts = append(opts, WithBasePath(p))
	}
	q := u.Query()
	if v, ok, err := urlparams.Take(q, sessionTTLParam, oldSessionParam); err != nil {
		return bad("%v", err)
	} else if ok {
		t, err := time.ParseDuration(v)
		if err != nil {
			return bad("%s: %v", sessionTTLParam, err)
		}
		opt := WithSessionTTL(t)
		if err := opt(&options{}); err != nil {
			return bad("%s: %v", sessionTTLParam, err)
		}
		opts = append(opts, opt)
	}
	if err := urlparams.Unknown(q, sessionTTLParam); err != nil {
		return bad("%v", err)
	}
	return servers, opts, nil
}
