package main

import (
	"context"
	"errors"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/dlock-go/dlock/internal/benchkit"
	"github.com/dlock-go/dlock/internal/benchtargets"
	"github.com/dlock-go/dlock/internal/testserver"
)

// memcachedRetry is the polled lock's sleep after a failed add.
const memcachedRetry = 10 * time.Millisecond

// memcachedBackend is one memcached server: dlock and the lock people
// write over memcached by hand, add with an expiry (it fails while the key
// exists), polled every 10 ms, released by delete.
var memcachedBackend = backend{name: "memcached", start: onServer(
	func(ctx context.Context) (*testserver.Server, error) { return testserver.StartMemcached(ctx) },
	func(_ context.Context, addr string) (benchkit.Target, func(), error) {
		return benchtargets.Memcached("memcache://" + addr)
	},
	func(addr string) []peer {
		return []peer{{name: "add, polled", newLocker: func(_ context.Context, key string) (benchkit.Locker, func(), error) {
			c := memcache.New(addr)
			k := "peers-" + key[len("peers/"):] // memcached keys: no spaces or controls; '/' is fine
			p := &benchkit.Poller{
				Try: func(_ context.Context, key, id string) (bool, error) {
					err := c.Add(&memcache.Item{Key: key, Value: []byte(id), Expiration: int32(ttl / time.Second)})
					if errors.Is(err, memcache.ErrNotStored) {
						return false, nil
					}
					return err == nil, err
				},
				Release: func(_ context.Context, key, _ string) error { return c.Delete(key) },
				Retry:   memcachedRetry,
			}
			return p.Locker(k), func() { _ = c.Close() }, nil
		}}}
	})}
