package redis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/driver"
)

// Inspect describes the lock on key as a majority of the masters see it: it
// is held when a quorum of masters hold it, by the holder most of them name;
// its token is the highest any master reports, its TTL the time until fewer
// than a quorum would still hold it, and its waiters the most any master
// counts (each waiting driver subscribes on every master). It fails when
// fewer than a quorum of masters answer.
func (r *RedLock) Inspect(ctx context.Context, key string) (driver.Info, error) {
	if err := r.enter(ctx); err != nil {
		return driver.Info{}, err
	}
	n := namesOf(r.prefix, key)
	infos := make([]driver.Info, 0, len(r.nodes))
	var errs []error
	var mu sync.Mutex
	r.each(ctx, inspectTimeout, nil, func(ctx context.Context, i int, nd *rlNode) {
		var state *goredis.Cmd
		var subs *goredis.MapStringIntCmd
		_, err := nd.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
			state = inspectScript.Eval(ctx, p, []string{n.lock, n.fence()})
			subs = p.PubSubNumSub(ctx, n.channel())
			return nil
		})
		var info driver.Info
		if err == nil || errors.Is(err, goredis.Nil) {
			info, err = infoOf(state, int(subs.Val()[n.channel()]))
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", nd.name, err))
			return
		}
		infos = append(infos, info)
	})
	if len(infos) < r.quorum {
		if err := ctx.Err(); err != nil {
			return driver.Info{}, err
		}
		return driver.Info{}, r.opErr(fmt.Errorf("redis: redlock: %d of %d masters answered, %d needed: %w",
			len(infos), len(r.nodes), r.quorum, errors.Join(errs...)))
	}
	return mergeInfos(infos, r.quorum), nil
}

// inspectTimeout bounds one master's answer to Inspect, an operator's
// command without a TTL to fit in.
const inspectTimeout = 2 * time.Second

// mergeInfos is the majority's view of the masters' infos.
func mergeInfos(infos []driver.Info, quorum int) driver.Info {
	var out driver.Info
	holders := map[string]int{}
	var held []driver.Info
	for _, in := range infos {
		out.Token = max(out.Token, in.Token)
		out.Waiters = max(out.Waiters, in.Waiters)
		if in.Held {
			held = append(held, in)
			holders[in.Owner]++
		}
	}
	if len(held) < quorum {
		return out
	}
	best := held[0]
	for _, in := range held {
		if holders[in.Owner] > holders[best.Owner] {
			best = in
		}
	}
	out.Held, out.Mode, out.Holders, out.Owner = true, best.Mode, best.Holders, best.Owner
	slices.SortFunc(held, func(a, b driver.Info) int { return cmp.Compare(b.TTL, a.TTL) })
	out.TTL = held[quorum-1].TTL
	return out
}
