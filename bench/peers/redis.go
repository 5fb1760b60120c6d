package main

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/internal/benchkit"
	"github.com/dlock-go/dlock/internal/benchtargets"
	"github.com/dlock-go/dlock/internal/testserver"
)

// redisRetry is redislock's retry delay: its LinearBackoff(100 ms), the
// strategy of its documentation's example. redsync keeps its own default
// (a random 50–250 ms).
const redisRetry = 100 * time.Millisecond

// redisBackend is one Redis server: dlock, redsync and redislock.
var redisBackend = backend{name: "redis", start: onServer(testserver.StartRedis,
	func(_ context.Context, addr string) (benchkit.Target, func(), error) {
		return benchtargets.Redis("redis://" + addr + "/0")
	},
	func(addr string) []peer {
		var sent atomic.Uint64 // requests of the peers' clients
		return []peer{
			redsyncPeer(&sent, addr),
			{name: "redislock", requests: sent.Load, newLocker: func(_ context.Context, key string) (benchkit.Locker, func(), error) {
				c := countedClient(&sent, addr)
				rl := redislock.New(c)
				opts := &redislock.Options{RetryStrategy: redislock.LinearBackoff(redisRetry)}
				return benchkit.LockerFunc(func(ctx context.Context) (func(context.Context) error, error) {
					for {
						// Obtain gives up after the TTL when ctx has no
						// deadline (with DeadlineExceeded): ask again, as
						// a caller that must get the lock does.
						l, err := rl.Obtain(ctx, key, ttl, opts)
						if (errors.Is(err, redislock.ErrNotObtained) || errors.Is(err, context.DeadlineExceeded)) && ctx.Err() == nil {
							continue
						}
						if err != nil {
							return nil, err
						}
						return l.Release, nil
					}
				}), func() { _ = c.Close() }, nil
			}},
		}
	})}

// redlockBackend is RedLock over 5 independent Redis masters: dlock's
// redlock:// driver and redsync over the same masters (redsync's own
// algorithm is RedLock). Requests are counted on all five: a request sent
// to every master counts five.
var redlockBackend = backend{name: "redlock", start: func(ctx context.Context) (*env, error) {
	g, err := testserver.StartRedisGroup(ctx, redlockMasters)
	if err != nil {
		return nil, err
	}
	terminate := func() { _ = g.Terminate(context.WithoutCancel(ctx)) }
	t, done, err := benchtargets.RedLock(g.RedLockURL(), g.Addrs())
	if err != nil {
		terminate()
		return nil, err
	}
	var sent atomic.Uint64
	return &env{dlock: t, peers: []peer{redsyncPeer(&sent, g.Addrs()...)}, stop: func() { done(); terminate() }}, nil
}}

// redlockMasters is how many masters the RedLock backend has.
const redlockMasters = 5

// redsyncPeer is redsync over the Redis servers at addrs (one: a single
// server; several: RedLock over them), with unlimited tries and its
// default retry delay; sent counts its clients' requests.
func redsyncPeer(sent *atomic.Uint64, addrs ...string) peer {
	return peer{name: "redsync", requests: sent.Load, newLocker: func(_ context.Context, key string) (benchkit.Locker, func(), error) {
		var pools []redsyncredis.Pool
		var clients []*goredis.Client
		for _, a := range addrs {
			c := countedClient(sent, a)
			clients = append(clients, c)
			pools = append(pools, redsyncgoredis.NewPool(c))
		}
		m := redsync.New(pools...).NewMutex(key, redsync.WithExpiry(ttl), redsync.WithTries(math.MaxInt32))
		return benchkit.LockerFunc(func(ctx context.Context) (func(context.Context) error, error) {
				if err := m.LockContext(ctx); err != nil {
					return nil, err
				}
				return func(ctx context.Context) error { _, err := m.UnlockContext(ctx); return err }, nil
			}), func() {
				for _, c := range clients {
					_ = c.Close()
				}
			}, nil
	}}
}

// countedClient is a go-redis client of addr whose requests sent counts.
func countedClient(sent *atomic.Uint64, addr string) *goredis.Client {
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	c.AddHook(counter{sent})
	return c
}

// counter is a go-redis hook that counts the requests a client sends: each
// command, and each pipeline once.
type counter struct{ n *atomic.Uint64 }

func (counter) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (c counter) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c counter) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}
