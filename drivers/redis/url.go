package redis

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/urlparams"
)

// The URL schemes this package registers with dlock.Open.
const (
	// Scheme is plain TCP: "redis://host:port/db".
	Scheme = "redis"
	// SchemeTLS is TLS: "rediss://host:port/db".
	SchemeTLS = "rediss"
)

// prefixParam is the one query parameter the driver takes for itself; the
// others are go-redis's.
const prefixParam = "key_prefix"

// The package's schemes, each with the dlock.OpenFunc that opens it: a
// single server, a Cluster, RedLock's independent masters, and a master
// found through Sentinel, each over plain TCP or TLS.
func init() {
	for scheme, opener := range map[string]dlock.OpenFunc{
		Scheme:            open,
		SchemeTLS:         open,
		SchemeCluster:     openCluster,
		SchemeClusterTLS:  openCluster,
		SchemeRedLock:     openRedLock,
		SchemeRedLockTLS:  openRedLock,
		SchemeSentinel:    openSentinel,
		SchemeSentinelTLS: openSentinel,
	} {
		dlock.Register(scheme, opener)
	}
}

// open is the dlock.OpenFunc of the single-server schemes.
var open = urlparams.Opener(urlparams.Parsed(parseURL, connect))

// connect makes a go-redis client from u, checks that the server answers
// (a PING bounded by ctx), and returns a Driver that owns it.
func connect(ctx context.Context, u *url.URL, opt *goredis.Options, o options, _ time.Duration) (driver.Driver, error) {
	return openOwned(ctx, u, goredis.NewClient(opt), o)
}

// parseURL checks u and turns it into go-redis options and the driver's own.
// Its errors wrap dlock.ErrInvalidURL and never contain the password.
func parseURL(u *url.URL) (*goredis.Options, options, error) {
	o := defaultOptions()
	bad := func(format string, args ...any) (*goredis.Options, options, error) {
		return nil, o, urlparams.Invalid(u, format, args...)
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != Scheme && scheme != SchemeTLS {
		return bad("scheme %q: want %s:// or %s://", u.Scheme, Scheme, SchemeTLS)
	}
	if u.Opaque != "" {
		return bad("want %s://[[user]:password@]host[:port][/db]", scheme)
	}
	// net/url takes "redis://::1:6379" apart as host "::1", port "6379" and
	// "redis://::1" as host ":", port "1": refuse rather than guess.
	if strings.Contains(u.Hostname(), ":") && !strings.HasPrefix(u.Host, "[") {
		return bad("an IPv6 address must be in brackets, as in %s://[::1]:6379", scheme)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return bad("port %q is not in 1 to 65535", p)
		}
	}
	q := u.Query()
	if err := takePrefix(q, &o); err != nil {
		return bad("%v", err)
	}
	if err := takeReplicaAcks(q, &o); err != nil {
		return bad("%v", err)
	}
	rest := *u
	rest.Scheme = scheme
	rest.RawQuery = q.Encode()
	opt, err := goredis.ParseURL(rest.String())
	if err != nil {
		return bad("%v", err)
	}
	// Let the contexts of dlock's calls bound their commands: a renewal must
	// not outlive the lease it is trying to save, nor a cancelled Lock wait
	// for go-redis's read timeout.
	opt.ContextTimeoutEnabled = true
	opt.MaintNotificationsConfig = maintOff()
	return opt, o, nil
}

// takePrefix moves the key_prefix parameter, when q has it, from q to o.
func takePrefix(q url.Values, o *options) error {
	v, ok, err := urlparams.Take(q, prefixParam)
	if err != nil || !ok {
		return err
	}
	if err := checkPrefix(v); err != nil {
		return fmt.Errorf("%s: %w", prefixParam, err)
	}
	o.prefix = v
	return nil
}

// urlHosts returns the nodes a multi-node URL lists: host1,host2,... in the
// authority, then every addr= parameter, which it removes from q.
func urlHosts(u *url.URL, q url.Values) []string {
	var hosts []string
	if u.Host != "" {
		hosts = strings.Split(u.Host, ",")
	}
	hosts = append(hosts, q[addrParam]...)
	q.Del(addrParam)
	return hosts
}

// checkNodes puts each "host[:port]" of hosts, nodes of a multi-node URL
// of nodeScheme's kind, through the single-node checks (port range, IPv6
// brackets) and rewrites it as go-redis's "host:port", with defaultPort
// where it has none ("" for go-redis's 6379). Its errors name the node as
// "what N", counted from 1.
func checkNodes(hosts []string, nodeScheme, defaultPort, what string) error {
	for i, h := range hosts {
		if h == "" {
			return fmt.Errorf("%s %d has an empty address", what, i+1)
		}
		node := url.URL{Scheme: nodeScheme, Host: h}
		if node.Port() == "" && defaultPort != "" && !strings.HasSuffix(h, ":") {
			node.Host = net.JoinHostPort(node.Hostname(), defaultPort)
		}
		opt, _, err := parseURL(&node)
		if err != nil {
			return fmt.Errorf("%s %d: %s", what, i+1, strings.TrimPrefix(err.Error(), dlock.ErrInvalidURL.Error()+": "))
		}
		hosts[i] = opt.Addr
	}
	return nil
}

// openOwned returns a Driver that owns client, made from u, once it
// answers (see pingOwned).
func openOwned(ctx context.Context, u *url.URL, client goredis.UniversalClient, o options) (driver.Driver, error) {
	if err := pingOwned(ctx, u, client); err != nil {
		return nil, err
	}
	return newDriver(client, true, o), nil
}

// pingOwned checks that a client made from u answers, and closes it when it
// does not: a wrong address or password should fail at Open, where the
// caller expects configuration errors, not at the first Lock.
func pingOwned(ctx context.Context, u *url.URL, client goredis.UniversalClient) error {
	// go-redis bounds a read by ctx's deadline, not by its cancellation:
	// closing the client is what ends a wait on a silent server.
	stop := context.AfterFunc(ctx, func() { _ = client.Close() })
	err := client.Ping(ctx).Err()
	if !stop() {
		return ctx.Err()
	}
	if err == nil {
		return nil
	}
	_ = client.Close()
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	return fmt.Errorf("redis: %s: %w", urlparams.Display(u), err)
}
