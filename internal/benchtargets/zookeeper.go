package benchtargets

import (
	"context"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/benchkit"
)

// ZooKeeper is the ZooKeeper server at url (zk://...; the zookeeper driver
// must be imported). The driver accepts TTLs from one to two session
// timeouts, so clients get a TTL of 1.5 session timeouts, and the held-locks
// measurement one session timeout at least. No raw comparison or request
// count: the driver's own tests compare with create+delete and zk.Lock.
// The held-locks measurement holds 1,000 locks: the driver renews each lease
// with a round trip of its own (no batching yet), and 10,000 renewals per
// third of a 4 s session do not fit on a 2-core machine.
func ZooKeeper(url string, sessionTimeout time.Duration) benchkit.Target {
	t := benchkit.Target{
		Name: "zookeeper",
		NewClient: func(ctx context.Context, opts ...dlock.Option) (*dlock.Client, error) {
			return dlock.Open(ctx, url, append([]dlock.Option{dlock.WithTTL(sessionTimeout * 3 / 2)}, opts...)...)
		},
		MinTTL:  sessionTimeout,
		MaxHeld: 1000,
	}
	return t
}
