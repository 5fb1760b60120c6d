package redis

import (
	"context"
	"testing"

	"github.com/dlock-go/dlock/conformance"
	"github.com/dlock-go/dlock/driver"
)

// TestConformance runs the shared suite against the real server, with its
// fault hooks when the server is this package's container.
func TestConformance(t *testing.T) {
	rdb := newRDB(t)
	h := conformance.Harness{
		NewDriver: func(ctx context.Context) (driver.Driver, error) {
			return open(ctx, mustURL(t, server.URL))
		},
		// Tampering is what an operator with redis-cli would do to the lock key.
		Tamper: func(ctx context.Context, key string, overwrite bool) error {
			n := namesOf(DefaultKeyPrefix, key)
			if overwrite {
				return rdb.Set(ctx, n.lock, "stranger", 0).Err()
			}
			return rdb.Del(ctx, n.lock).Err()
		},
	}
	if server.Faults() {
		h.Faults = &conformance.Faults{
			Pause:  server.Server.Pause,
			Resume: server.Server.Unpause,
			Restart: func(ctx context.Context) error {
				if err := server.Server.Stop(ctx); err != nil {
					return err
				}
				return server.Server.Start(ctx)
			},
		}
	}
	conformance.Run(t, h)
}
