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

// Inspect describes the lock on key as a majority of the masters see it,
// by the rule "RedLock" in the package documentation states: it is held
// when a quorum of masters report the same settled hold (the same mode,
// holder, fencing token and value; or a stranger's key), and that hold's
// holder, token and value are reported, so that the token is always the
// one the holder's lease has; its TTL is the time until fewer than a
// quorum of those masters would still hold it, and its waiters the most
// any master counts (each waiting driver subscribes on every master). A
// lock no quorum agrees on, a grant in its second phase among them, is
// reported free, with the highest token a free master issued. It fails
// when fewer than a quorum of masters answer.
func (r *RedLock) Inspect(ctx context.Context, key string) (driver.Info, error) {
	if err := r.enter(ctx); err != nil {
		return driver.Info{}, err
	}
	n := namesOf(r.prefix, key)
	views := make([]inspectView, 0, len(r.nodes))
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
		var view inspectView
		if err == nil || errors.Is(err, goredis.Nil) {
			view, err = readInspect(state, int(subs.Val()[n.channel()]))
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", nd.name, err))
			return
		}
		views = append(views, view)
	})
	if len(views) < r.quorum {
		if err := ctx.Err(); err != nil {
			return driver.Info{}, err
		}
		return driver.Info{}, r.opErr(fmt.Errorf("redis: redlock: %d of %d masters answered, %d needed: %w",
			len(views), len(r.nodes), r.quorum, errors.Join(errs...)))
	}
	return mergeViews(views, r.quorum), nil
}

// inspectTimeout bounds one master's answer to Inspect, an operator's
// command without a TTL to fit in.
const inspectTimeout = 2 * time.Second

// rlHold is what masters must agree on for Inspect to report a hold.
type rlHold struct {
	stranger bool
	mode     driver.Mode
	owner    string
	token    uint64
	value    string
}

// mergeViews is the majority's view of the masters' replies: the settled
// hold (or stranger's key) that a quorum of them report alike, or a free
// lock when there is none. Masters whose holds are all pending, and those
// that report another hold, count for no hold: a grant whose second phase
// has not settled it on a quorum is not reported, and no token a lease
// does not have can come from a master that has not settled it.
func mergeViews(views []inspectView, quorum int) driver.Info {
	var out driver.Info
	groups := map[rlHold][]driver.Info{}
	for _, v := range views {
		in := v.info
		out.Waiters = max(out.Waiters, in.Waiters)
		switch {
		case !in.Held:
			out.Token = max(out.Token, in.Token) // the master's latest issued
		case v.stranger:
			groups[rlHold{stranger: true}] = append(groups[rlHold{stranger: true}], in)
		case v.settled:
			h := rlHold{mode: in.Mode, owner: in.Owner, token: in.Token, value: in.Value}
			groups[h] = append(groups[h], in)
		}
	}
	// Each master is in one group at most, so at most one has a quorum.
	for h, held := range groups {
		if len(held) < quorum {
			continue
		}
		out.Held, out.Mode, out.Owner, out.Token, out.Value = true, h.mode, h.owner, h.token, h.value
		out.Holders = held[0].Holders
		for _, in := range held {
			out.Holders = min(out.Holders, in.Holders)
		}
		slices.SortFunc(held, func(a, b driver.Info) int { return cmp.Compare(b.TTL, a.TTL) })
		out.TTL = held[quorum-1].TTL
		return out
	}
	return out
}
