package main

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
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
		newClient := func() *goredis.Client {
			c := goredis.NewClient(&goredis.Options{Addr: addr})
			c.AddHook(counter{&sent})
			return c
		}
		return []peer{
			{name: "redsync", requests: sent.Load, newLocker: func(_ context.Context, key string) (benchkit.Locker, func(), error) {
				c := newClient()
				m := redsync.New(redsyncgoredis.NewPool(c)).NewMutex(key, redsync.WithExpiry(ttl), redsync.WithTries(math.MaxInt32))
				return benchkit.LockerFunc(func(ctx context.Context) (func(context.Context) error, error) {
					if err := m.LockContext(ctx); err != nil {
						return nil, err
					}
					return func(ctx context.Context) error { _, err := m.UnlockContext(ctx); return err }, nil
				}), func() { _ = c.Close() }, nil
			}},
			{name: "redislock", requests: sent.Load, newLocker: func(_ context.Context, key string) (benchkit.Locker, func(), error) {
				c := newClient()
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
