package redis

import (
	"context"
	"fmt"
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
// single server, a Cluster, and RedLock's independent masters, each over
// plain TCP or TLS.
func init() {
	for scheme, opener := range map[string]dlock.OpenFunc{
		Scheme:           open,
		SchemeTLS:        open,
		SchemeCluster:    openCluster,
		SchemeClusterTLS: openCluster,
		SchemeRedLock:    openRedLock,
		SchemeRedLockTLS: openRedLock,
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

// multiNodeScheme checks the scheme and form of a URL that lists several
// servers (a Cluster's nodes, RedLock's masters): its scheme is plain or
// tls, and it is not opaque (after the host list, the form wanted may have
// more, such as "[/db]"). It returns the scheme of one of its servers:
// [Scheme] or [SchemeTLS].
func multiNodeScheme(u *url.URL, plain, tls, more string) (string, error) {
	scheme := strings.ToLower(u.Scheme)
	node := Scheme
	switch scheme {
	case plain:
	case tls:
		node = SchemeTLS
	default:
		return "", urlparams.Invalid(u, "scheme %q: want %s:// or %s://", u.Scheme, plain, tls)
	}
	if u.Opaque != "" {
		return "", urlparams.Invalid(u, "want %s://[[user]:password@]host1[:port],host2[:port],...%s", scheme, more)
	}
	return node, nil
}

// parseNode parses one server of a multi-node URL, node, as a URL of its
// own, for the single-server checks (port range, IPv6 brackets) and the
// default port; what names it in errors ("node 2"). Its errors do not wrap
// dlock.ErrInvalidURL: the caller's, about the whole URL, do.
func parseNode(node *url.URL, what string) (*goredis.Options, options, error) {
	if node.Host == "" {
		return nil, options{}, fmt.Errorf("%s has an empty address", what)
	}
	opt, o, err := parseURL(node)
	if err != nil { // parseURL's message is redacted already
		return nil, o, fmt.Errorf("%s: %s", what, strings.TrimPrefix(err.Error(), dlock.ErrInvalidURL.Error()+": "))
	}
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
