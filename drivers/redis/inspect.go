package redis

import (
	"context"
	"errors"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/driver"
)

// Inspect describes the lock on key in one pipelined round trip: its holder's
// request ID, the time left, the latest fencing token, and how many clients
// are subscribed to its release channel (waiting, or lingering for up to 2 s
// after their last waiter left).
func (d *Driver) Inspect(ctx context.Context, key string) (driver.Info, error) {
	if err := d.enter(ctx); err != nil {
		return driver.Info{}, err
	}
	n := namesOf(d.prefix, key)
	var owner *goredis.StringCmd
	var pttl *goredis.DurationCmd
	var fence *goredis.StringCmd
	var subs *goredis.MapStringIntCmd
	_, err := d.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		owner = p.Get(ctx, n.lock)
		pttl = p.PTTL(ctx, n.lock)
		fence = p.Get(ctx, n.fence)
		subs = p.PubSubNumSub(ctx, n.channel)
		return nil
	})
	if err != nil && !errors.Is(err, goredis.Nil) {
		return driver.Info{}, d.opErr(err)
	}
	info := driver.Info{Waiters: int(subs.Val()[n.channel])}
	info.Token, _ = strconv.ParseUint(fence.Val(), 10, 64)
	if id, err := owner.Result(); err == nil {
		info.Held, info.Holders, info.Owner = true, 1, id
		if ttl := pttl.Val(); ttl > 0 {
			info.TTL = ttl.Round(time.Millisecond)
		}
	}
	return info, nil
}

var _ driver.Inspector = (*Driver)(nil)
