package hazelcast

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hazelcast/hazelcast-go-client"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/benchkit"
)

// BenchmarkSuite runs the standard benchmark suite (internal/benchkit)
// against the test cluster, comparing with a raw tryLock(lease) + unlock in
// the same run. It skips without a cluster (see main_test.go).
//
//	go test -run '^$' -bench Suite -benchtime 1x ./drivers/hazelcast/
func BenchmarkSuite(b *testing.B) {
	mapName := testMapName()
	u := memberURL(b, mapName)
	raw := rawClient(b)
	rawMap, err := raw.GetMap(b.Context(), mapName+"-raw")
	if err != nil {
		b.Fatal(err)
	}
	var requests atomic.Uint64
	benchkit.Run(b, benchkit.Target{
		Name: "hazelcast",
		NewClient: func(ctx context.Context, opts ...dlock.Option) (*dlock.Client, error) {
			d, err := open(ctx, u)
			if err != nil {
				return nil, err
			}
			hd := d.(*Driver)
			hd.api = countingAPI{api: hd.api, n: &requests}
			c, err := dlock.New(hd, opts...)
			if err != nil {
				_ = hd.Close()
			}
			return c, err
		},
		Raw: func(ctx context.Context, key string) error {
			lc := hazelcast.NewLockContext(ctx)
			if _, err := rawMap.TryLockWithLease(lc, key, dlock.DefaultTTL); err != nil {
				return err
			}
			return rawMap.Unlock(lc, key)
		},
		Requests: requests.Load,
		MinTTL:   MinTTL,
		// A renewal is four requests (see lease.Extend), so 10,000 locks
		// renewed every second (a third of the 3 s TTL) would ask one member
		// on this 2-core machine for 40,000 requests a second: at load ~30
		// a lease was lost that way. 1,000 measures the cost per lock.
		MaxHeld: 1000,
	})
}

// countingAPI counts the requests the driver sends: each call is one.
type countingAPI struct {
	api
	n *atomic.Uint64
}

func (c countingAPI) tryLock(ctx context.Context, key string, lease, wait time.Duration) (bool, error) {
	c.n.Add(1)
	return c.api.tryLock(ctx, key, lease, wait)
}

func (c countingAPI) unlock(ctx context.Context, key string) error {
	c.n.Add(1)
	return c.api.unlock(ctx, key)
}

func (c countingAPI) fence(ctx context.Context, key string) (int64, bool, error) {
	c.n.Add(1)
	return c.api.fence(ctx, key)
}

func (c countingAPI) initFence(ctx context.Context, key string, v int64) (bool, error) {
	c.n.Add(1)
	return c.api.initFence(ctx, key, v)
}

func (c countingAPI) advanceFence(ctx context.Context, key string, old, v int64) (bool, error) {
	c.n.Add(1)
	return c.api.advanceFence(ctx, key, old, v)
}
