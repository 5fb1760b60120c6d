package redis

import (
	"context"
	"net/url"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/internal/urlparams"
)

// The URL schemes of Redis Cluster.
const (
	// SchemeCluster is a Cluster over plain TCP, named by some of its nodes:
	// "redis+cluster://host1:7000,host2:7001".
	SchemeCluster = "redis+cluster"
	// SchemeClusterTLS is the same over TLS: "rediss+cluster://...".
	SchemeClusterTLS = "rediss+cluster"
)

// openCluster is the dlock.OpenFunc of the Cluster schemes: a Driver that
// owns a go-redis ClusterClient, once the cluster answers.
var openCluster = ownedOpener(parseClusterURL, func(opt *goredis.ClusterOptions) goredis.UniversalClient {
	return goredis.NewClusterClient(opt)
})

// parseClusterURL checks u and turns it into go-redis cluster options and
// the driver's own. Its errors wrap dlock.ErrInvalidURL and never contain
// the password.
func parseClusterURL(u *url.URL) (*goredis.ClusterOptions, options, error) {
	_, nodeScheme, err := nodeSchemeOf(u, SchemeCluster, SchemeClusterTLS, "[[user]:password@]host1[:port],host2[:port],...")
	if err != nil {
		return nil, options{}, err
	}
	o := defaultOptions()
	bad := func(format string, args ...any) (*goredis.ClusterOptions, options, error) {
		return nil, o, urlparams.Invalid(u, format, args...)
	}
	if p := strings.TrimPrefix(u.Path, "/"); p != "" && p != "0" {
		return bad("a Cluster has database 0 only, not %q", p)
	}
	q := u.Query()
	hosts := urlHosts(u, q)
	if len(hosts) == 0 {
		return bad("no nodes: list some as host1:port,host2:port,... (or addr=host:port parameters)")
	}
	if err := takePrefix(q, &o); err != nil {
		return bad("%v", err)
	}
	if err := checkNodes(hosts, nodeScheme, "", "node"); err != nil {
		return bad("%v", err)
	}
	for _, h := range hosts[1:] {
		q.Add(addrParam, h)
	}
	first := url.URL{Scheme: nodeScheme, User: u.User, Host: hosts[0], RawQuery: q.Encode()}
	opt, err := goredis.ParseClusterURL(first.String())
	if err != nil {
		return bad("%v", err)
	}
	// As for a single server: contexts bound the commands they send.
	opt.ContextTimeoutEnabled = true
	opt.MaintNotificationsConfig = maintOff()
	return opt, o, nil
}

// clusterNumSub counts the subscribers of a shard channel on the master that
// owns its slot: PUBSUB SHARDNUMSUB is per node, and a ClusterClient would
// send it to any.
func clusterNumSub(ctx context.Context, cc *goredis.ClusterClient, channel string) (int, error) {
	master, err := cc.MasterForKey(ctx, channel)
	if err != nil {
		return 0, err
	}
	n, err := master.PubSubShardNumSub(ctx, channel).Result()
	return int(n[channel]), err
}
