package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/urlparams"
)

// The URL schemes of RedLock.
const (
	// SchemeRedLock lists independent masters over plain TCP:
	// "redlock://host1:6379,host2:6379,host3:6379/0".
	SchemeRedLock = "redlock"
	// SchemeRedLockTLS is the same over TLS: "redlocks://...".
	SchemeRedLockTLS = "redlocks"
)

// Query parameters of RedLock URLs, beside go-redis's and key_prefix.
const (
	nodeTimeoutParam = "node_timeout" // WithNodeTimeout, as a Go duration
	addrParam        = "addr"         // a master, for addresses a URL host list cannot carry (IPv6)
)

// openRedLock is the dlock.OpenFunc of the RedLock schemes.
var openRedLock = urlparams.Opener(connectRedLock)

// connectRedLock opens the RedLock schemes (see urlparams.Opener): it makes one
// go-redis client per master, checks that they are distinct servers, and
// returns a RedLock that owns them. Masters down at Open are tolerated as
// long as a quorum answers.
func connectRedLock(ctx context.Context, u *url.URL, _ time.Duration) (driver.Driver, error) {
	opts, o, err := parseRedLockURL(u)
	if err != nil {
		return nil, err
	}
	addrs := make([]string, len(opts))
	for i, opt := range opts {
		addrs[i] = opt.Addr
	}
	lookup := func(host string) ([]netip.Addr, error) {
		return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	}
	if err := distinctAddrs(addrs, lookup); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, fmt.Errorf("%w: %s: %w", dlock.ErrInvalidURL, urlparams.Display(u), err)
	}
	clients := make([]goredis.UniversalClient, len(opts))
	for i, opt := range opts {
		clients[i] = goredis.NewClient(opt)
	}
	closeAll := func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}
	// go-redis bounds a read by ctx's deadline, not by its cancellation:
	// closing the clients is what ends a wait on a silent server.
	stop := context.AfterFunc(ctx, closeAll)
	ids, errs := runIDs(ctx, clients)
	if !stop() {
		return nil, ctx.Err()
	}
	answered := 0
	for _, id := range ids {
		if id != "" {
			answered++
		}
	}
	if quorum := len(clients)/2 + 1; answered < quorum {
		closeAll()
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, fmt.Errorf("redis: %s: %d of %d masters answered, %d needed: %w",
			urlparams.Display(u), answered, len(clients), quorum, errors.Join(errs...))
	}
	for i, id := range ids {
		for j := range i {
			if id != "" && id == ids[j] {
				closeAll()
				return nil, fmt.Errorf("%w: %s: masters %s and %s are the same server (run_id %s)",
					dlock.ErrInvalidURL, urlparams.Display(u), addrs[j], addrs[i], id)
			}
		}
	}
	return newRedLock(clients, addrs, true, o), nil
}

// runIDs asks every server for its run_id (INFO server) at once; "" for
// those that did not answer, with the reason in errs.
func runIDs(ctx context.Context, clients []goredis.UniversalClient) ([]string, []error) {
	ids := make([]string, len(clients))
	errs := make([]error, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			info, err := c.Info(ctx, "server").Result()
			if err != nil {
				errs[i] = fmt.Errorf("%s: %w", clientAddr(c), err)
				return
			}
			for line := range strings.SplitSeq(info, "\n") {
				if id, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok {
					ids[i] = id
				}
			}
			if ids[i] == "" {
				errs[i] = fmt.Errorf("%s: INFO server has no run_id", clientAddr(c))
			}
		})
	}
	wg.Wait()
	return ids, errs
}

// parseRedLockURL checks u and returns one set of go-redis options per
// master, and the driver's own options. Its errors wrap dlock.ErrInvalidURL
// and never contain the password.
func parseRedLockURL(u *url.URL) ([]*goredis.Options, options, error) {
	_, nodeScheme, err := nodeSchemeOf(u, SchemeRedLock, SchemeRedLockTLS, "[[user]:password@]host1[:port],host2[:port],...[/db]")
	if err != nil {
		return nil, options{}, err
	}
	o := defaultOptions()
	bad := func(format string, args ...any) ([]*goredis.Options, options, error) {
		return nil, o, urlparams.Invalid(u, format, args...)
	}
	q := u.Query()
	hosts := urlHosts(u, q)
	if len(hosts) == 0 {
		return bad("no masters: list them as host1:port,host2:port,... (or addr=host:port parameters)")
	}
	if v, ok, err := urlparams.Take(q, nodeTimeoutParam); err != nil {
		return bad("%v", err)
	} else if ok {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Millisecond {
			return bad("%s %q: want a duration of at least 1ms, as in 50ms", nodeTimeoutParam, v)
		}
		o.nodeTimeout = d
	}
	opts := make([]*goredis.Options, 0, len(hosts))
	for i, h := range hosts {
		if h == "" {
			return bad("master %d has an empty address", i+1)
		}
		node := url.URL{Scheme: nodeScheme, User: u.User, Host: h, Path: u.Path, RawQuery: q.Encode()}
		opt, no, err := parseURL(&node)
		if err != nil { // parseURL's message is redacted already
			return bad("master %d: %s", i+1, strings.TrimPrefix(err.Error(), dlock.ErrInvalidURL.Error()+": "))
		}
		if no.acks.n != 0 {
			return bad("%s: a RedLock's masters are independent, and it waits for none of their replicas", acksParam)
		}
		o.prefix = no.prefix
		opts = append(opts, opt)
	}
	return opts, o, nil
}

// distinctAddrs refuses a list of "host:port" addresses (go-redis's Addr;
// "" for unknown) of which two name the same server: the same port, and the
// same host once IP literals are made canonical, "localhost" is taken for
// the loopback addresses, and names are resolved by lookup (when not nil)
// to addresses that overlap.
func distinctAddrs(addrs []string, lookup func(host string) ([]netip.Addr, error)) error {
	type endpoint struct {
		addr, port, name string
		ips              []netip.Addr
	}
	var seen []endpoint
	for _, a := range addrs {
		if a == "" {
			continue
		}
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			host, port = a, "6379"
		}
		if host == "" {
			host = "localhost"
		}
		if p, err := strconv.Atoi(port); err == nil {
			port = strconv.Itoa(p) // "06379" is 6379
		}
		e := endpoint{addr: a, port: port, name: strings.TrimSuffix(strings.ToLower(host), ".")}
		switch ip, err := netip.ParseAddr(strings.Trim(host, "[]")); {
		case err == nil:
			e.ips = []netip.Addr{ip.Unmap().WithZone("")}
		case e.name == "localhost":
			e.ips = []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()}
		case lookup != nil:
			if ips, err := lookup(host); err == nil {
				for _, ip := range ips {
					e.ips = append(e.ips, ip.Unmap().WithZone(""))
				}
			}
		}
		for _, o := range seen {
			if o.port != e.port {
				continue
			}
			same := o.name == e.name
			for _, ip := range e.ips {
				same = same || slices.Contains(o.ips, ip)
			}
			if same {
				return fmt.Errorf("masters %s and %s are the same server: a RedLock needs independent masters, and a server listed twice would count twice towards the quorum", o.addr, e.addr)
			}
		}
		seen = append(seen, e)
	}
	return nil
}
