package redis

import (
	"context"
	"net/url"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/conformance"
	"github.com/dlock-go/dlock/conformance/containerfaults"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

// suiteTTL is the lock TTL of the conformance runs on a single server and
// on a Cluster. Renewal must get through within about two thirds of it; at
// 1 s a renewal held up by a stall of the whole machine (the race detector
// on 2 loaded cores) lost a lease in RenewalKeepsLock.
const suiteTTL = 2 * time.Second

// TestConformance runs the shared suite against the real server, with its
// fault hooks when the server is this package's container.
func TestConformance(t *testing.T) {
	rdb := newRDB(t)
	h := conformance.Harness{
		NewDriver: func(ctx context.Context) (driver.Driver, error) {
			return open(ctx, testkit.URL(t, server.URL))
		},
		TTL:             suiteTTL,
		Tamper:          tamper(rdb),
		NewLinkedDriver: linkedOpener(t, testkit.URL(t, server.URL), openLinked),
		Faults:          server.FaultHooks(),
		// Waiting clients queue beside the lock, and the head is served.
		ClientsServedInOrder: true,
	}
	conformance.Run(t, h)
}

// tamper is a Harness.Tamper over c: what an operator with redis-cli would
// do to the lock key.
func tamper(c goredis.Cmdable) func(ctx context.Context, key string, overwrite bool) error {
	return func(ctx context.Context, key string, overwrite bool) error {
		n := namesOf(DefaultKeyPrefix, key)
		if overwrite {
			return c.Set(ctx, n.lock, "stranger", 0).Err()
		}
		return c.Del(ctx, n.lock).Err()
	}
}

// linkedOpener is the partition cases' Harness.NewLinkedDriver: it opens a
// driver from u, as open does, whose every connection (to each server it
// dials: the one server, each master, each node of a cluster) goes through
// a link of its own.
func linkedOpener(t *testing.T, u *url.URL, open func(context.Context, *url.URL, dialer) (driver.Driver, error)) func(context.Context) (driver.Driver, conformance.Link, error) {
	return containerfaults.LinkedDial(t, func(ctx context.Context, dial dialer) (driver.Driver, error) {
		return open(ctx, u, dial)
	})
}

// dialer is go-redis's dial hook (Options.Dialer).
type dialer = containerfaults.DialFunc

// openLinked is open, dialing through dial.
func openLinked(ctx context.Context, u *url.URL, dial dialer) (driver.Driver, error) {
	opt, o, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	opt.Dialer = dial
	return openOwned(ctx, u, goredis.NewClient(opt), o)
}

// linkedNodeTimeout is the per-master timeout of a linked RedLock client:
// each request crosses a proxy in the test process, which under -race on a
// loaded machine takes more than the default 100 ms.
const linkedNodeTimeout = "500ms"

// openRedLockLinked is openRedLock, dialing every master through dial.
func openRedLockLinked(ctx context.Context, u *url.URL, dial dialer) (driver.Driver, error) {
	linked := *u
	q := linked.Query()
	if q.Get(nodeTimeoutParam) == "" {
		q.Set(nodeTimeoutParam, linkedNodeTimeout)
	}
	linked.RawQuery = q.Encode()
	opts, o, err := parseRedLockURL(&linked)
	if err != nil {
		return nil, err
	}
	clients := make([]goredis.UniversalClient, len(opts))
	addrs := make([]string, len(opts))
	for i, opt := range opts {
		opt.Dialer = dial
		clients[i], addrs[i] = goredis.NewClient(opt), opt.Addr
	}
	// Connect to every master now, as openRedLock does (it asks each for
	// its run_id), so that no case's first request pays for a dial and a
	// new proxy within the per-master timeout.
	for _, c := range clients {
		if err := c.Ping(ctx).Err(); err != nil {
			for _, c := range clients {
				_ = c.Close()
			}
			return nil, err
		}
	}
	return newRedLock(clients, addrs, true, o), nil
}

// openClusterLinked is openCluster, dialing every node through dial: the
// nodes' addresses come from the cluster itself (CLUSTER SLOTS, MOVED), and
// the link makes a proxy for each on first use.
func openClusterLinked(ctx context.Context, u *url.URL, dial dialer) (driver.Driver, error) {
	opt, o, err := parseClusterURL(u)
	if err != nil {
		return nil, err
	}
	opt.Dialer = dial
	return openOwned(ctx, u, goredis.NewClusterClient(opt), o)
}
