package etcd

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/urlparams"
)

// Scheme is the URL scheme this package registers with dlock.Open:
// "etcd://host1:2379,host2:2379/prefix?session_ttl=15s".
const Scheme = "etcd"

// DefaultPort is the port of an endpoint given without one.
const DefaultPort = "2379"

// The query parameter that sets the session TTL, and its deprecated name
// (which read as the locks' TTL, as ttl: does in the config file).
const (
	sessionTTLParam = "session_ttl"
	oldTTLParam     = "ttl"
)

func init() {
	dlock.Register(Scheme, open)
}

// open is the dlock.OpenFunc of the URL scheme(s) this package registers.
var open = urlparams.Opener(urlparams.Parsed(parseURL, connect))

// connect makes a clientv3 client from u, checks that the cluster answers a
// linearizable read, and returns a Driver that owns the client. The client
// dials lazily and retries in the background: the read, bounded by ctx, is
// what tells a cluster that answers from an address where nothing does.
func connect(ctx context.Context, u *url.URL, cfg clientv3.Config, o options, _ time.Duration) (driver.Driver, error) {
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
		return nil, fmt.Errorf("etcd: %s: %w", urlparams.Display(u), err)
	}
	// A wrong address should fail here, where the caller expects
	// configuration errors, not at the first Lock. A linearizable read needs
	// a leader, so this also checks that the cluster has a quorum.
	if _, err := cli.Get(ctx, o.prefix+"/", clientv3.WithCountOnly()); err != nil {
		_ = cli.Close()
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, fmt.Errorf("etcd: %s: %w", urlparams.Display(u), err)
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
		return cfg, o, urlparams.Invalid(u, format, args...)
	}
	if !strings.EqualFold(u.Scheme, Scheme) {
		return bad("scheme %q: want %s://", u.Scheme, Scheme)
	}
	if u.Opaque != "" || u.Host == "" {
		return bad("want %s://[user:password@]host[:port][,host[:port]...][/prefix][?session_ttl=15s]", Scheme)
	}
	if u.Fragment != "" {
		return bad("a fragment (#...) means nothing here")
	}
	endpoints, err := urlparams.Hosts(u.Host, DefaultPort)
	if err != nil {
		return bad("endpoint %v", err)
	}
	cfg.Endpoints = endpoints
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
	q := u.Query()
	if v, ok, err := urlparams.Take(q, sessionTTLParam, oldTTLParam); err != nil {
		return bad("%v", err)
	} else if ok {
		ttl, err := time.ParseDuration(v)
		if err == nil {
			err = checkSessionTTL(ttl)
		}
		if err != nil {
			return bad("%s: %v", sessionTTLParam, err)
		}
		o.ttl = ttl
	}
	if err := urlparams.Unknown(q, sessionTTLParam); err != nil {
		return bad("%v", err)
	}
	// Keepalive pings find a connection that died silently (no reset) in
	// seconds rather than TCP's minutes; etcd accepts pings every 5 s.
	cfg.DialKeepAliveTime = 5 * time.Second
	cfg.DialKeepAliveTimeout = 3 * time.Second
	// A library must not write to the process's stderr; errors reach the
	// caller through dlock's, and the client's lines go to slog at Debug.
	cfg.Logger = newLogger()
	return cfg, o, nil
}
