package benchtargets

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/internal/benchkit"
)

// Redis is the Redis server at url (the redis driver must be imported). Raw
// is SET NX PX then DEL; requests are counted by the server (INFO
// commandstats), so on a dedicated server they are the benchmark's own.
// The returned func closes the raw client.
func Redis(url string) (benchkit.Target, func(), error) {
	opt, err := goredis.ParseURL(url)
	if err != nil {
		return benchkit.Target{}, nil, err
	}
	raw := goredis.NewClient(opt)
	t := Open("redis", url)
	t.Raw = setDel(raw)
	t.Poller = &benchkit.Poller{
		Try: func(ctx context.Context, key, id string) (bool, error) {
			return raw.SetNX(ctx, key, id, 15*time.Second).Result()
		},
		Release: func(ctx context.Context, key, id string) error {
			return pollerRelease.Run(ctx, raw, []string{key}, id).Err()
		},
		Retry: pollerRetry,
	}
	t.Requests = commandsOf(raw)
	return t, func() { _ = raw.Close() }, nil
}

// setDel is the raw operation of the Redis targets: SET NX PX, then DEL,
// through c.
func setDel(c goredis.Cmdable) func(ctx context.Context, key string) error {
	return func(ctx context.Context, key string) error {
		if err := c.SetArgs(ctx, key, "raw", goredis.SetArgs{Mode: "NX", TTL: 15 * time.Second}).Err(); err != nil {
			return err
		}
		return c.Del(ctx, key).Err()
	}
}

// commandsOf is a Target's Requests over servers: the requests they have
// served (redisCommands), less the INFO calls that counted them, one per
// server each time.
func commandsOf(servers ...*goredis.Client) func() uint64 {
	var asked atomic.Uint64
	return func() uint64 {
		var n uint64
		for _, c := range servers {
			n += redisCommands(c)
		}
		return n - asked.Add(1)*uint64(len(servers))
	}
}

// pollerRelease deletes a polled lock if its owner still holds it, as
// polling Redis libraries do (redislock, redsync).
var pollerRelease = goredis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

// pollerRetry is the polling baseline's sleep after a failed try: a fixed
// 100 ms, as with redislock's LinearBackoff(100*time.Millisecond), whose
// handoff (50 ms p50, 100 ms p99) is the one shared/design/performance.md
// reports.
const pollerRetry = 100 * time.Millisecond

// requestCommands are the commands the redis driver sends itself; the
// commands its scripts run inside the server are not requests.
var requestCommands = []string{"eval", "evalsha", "subscribe", "unsubscribe", "ssubscribe", "sunsubscribe", "ping", "script"}

// redisCommands returns how many requests the server has served, from INFO
// commandstats: the calls of requestCommands, and of INFO (each call counts
// itself; Requests subtracts them).
func redisCommands(c *goredis.Client) uint64 {
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		return 0
	}
	var n uint64
	for line := range strings.SplitSeq(info, "\n") {
		name, stats, ok := strings.Cut(strings.TrimSpace(line), ":")
		cmd, isStat := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isStat || (cmd != "info" && !slices.Contains(requestCommands, cmd)) {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(stats, "calls="), ",")
		v, _ := strconv.ParseUint(calls, 10, 64)
		n += v
	}
	return n
}

// RedLock is RedLock over the masters at addrs, opened from url (a
// redlock:// URL of those masters; the redis driver must be imported). Raw
// is SET NX PX then DEL on the first master alone: the cost of one server,
// so that the ratio is RedLock's price over a single node. Requests are
// counted on every master (a request fanned out to five masters counts
// five). The returned func closes the raw clients.
func RedLock(url string, addrs []string) (benchkit.Target, func(), error) {
	if len(addrs) == 0 {
		return benchkit.Target{}, nil, fmt.Errorf("benchtargets: RedLock with no masters")
	}
	var raws []*goredis.Client
	for _, a := range addrs {
		raws = append(raws, goredis.NewClient(&goredis.Options{Addr: a}))
	}
	closeAll := func() {
		for _, c := range raws {
			_ = c.Close()
		}
	}
	t := Open("redlock", url)
	t.Raw = setDel(raws[0])
	t.Requests = commandsOf(raws...)
	return t, closeAll, nil
}

// RedisCluster is the Redis Cluster of the nodes at addrs, opened from url
// (a redis+cluster:// URL; the redis driver must be imported). Raw is SET NX
// PX then DEL through a go-redis ClusterClient; requests are counted on
// every node. The returned func closes the raw clients.
func RedisCluster(url string, addrs []string) (benchkit.Target, func(), error) {
	if len(addrs) == 0 {
		return benchkit.Target{}, nil, fmt.Errorf("benchtargets: RedisCluster with no nodes")
	}
	cluster := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs})
	var nodes []*goredis.Client
	for _, a := range addrs {
		nodes = append(nodes, goredis.NewClient(&goredis.Options{Addr: a}))
	}
	closeAll := func() {
		_ = cluster.Close()
		for _, c := range nodes {
			_ = c.Close()
		}
	}
	t := Open("redis-cluster", url)
	t.Raw = setDel(cluster)
	t.Requests = commandsOf(nodes...)
	return t, closeAll, nil
}
