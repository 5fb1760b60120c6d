package redis

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/benchkit"
)

// BenchmarkSuite runs the standard benchmark suite (internal/benchkit)
// against the test server, comparing with raw SET NX PX + DEL in the same
// run. Targets: uncontended within 1.2x raw; handoff p50 within 0.25 ms; at
// most 4 requests per critical section with 16 waiters in one process.
//
//	make bench   (or: go test -run '^$' -bench Suite -benchtime 1x ./drivers/redis/)
func BenchmarkSuite(b *testing.B) {
	server.Need(b)
	var requests roundTrips
	open := func() *goredis.Client {
		opt, err := goredis.ParseURL(server.URL)
		if err != nil {
			b.Fatal(err)
		}
		rdb := goredis.NewClient(opt)
		rdb.AddHook(&requests)
		return rdb
	}
	raw := open()
	b.Cleanup(func() { _ = raw.Close() })
	benchkit.Run(b, benchkit.Target{
		Name: "redis",
		NewClient: func(_ context.Context, opts ...dlock.Option) (*dlock.Client, error) {
			rdb := open()
			d, err := New(rdb)
			if err != nil {
				return nil, err
			}
			return dlock.New(&ownedClient{d, rdb}, opts...)
		},
		Raw: func(ctx context.Context, key string) error {
			if err := raw.SetArgs(ctx, key, "raw", goredis.SetArgs{Mode: "NX", TTL: 15 * time.Second}).Err(); err != nil {
				return err
			}
			return raw.Del(ctx, key).Err()
		},
		Requests: func() uint64 { return uint64(requests.n.Load()) },
	})
}

// ownedClient closes the benchmark's go-redis client with the driver.
type ownedClient struct {
	*Driver
	rdb *goredis.Client
}

func (c *ownedClient) Close() error {
	err := c.Driver.Close()
	_ = c.rdb.Close()
	return err
}

// roundTrips is a go-redis hook counting requests: a command, or a whole
// pipeline, is one round trip. Pub/sub commands travel on the PubSub's own
// connection, which hooks do not see.
type roundTrips struct{ n atomic.Int64 }

func (c *roundTrips) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (c *roundTrips) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *roundTrips) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}
