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
// when a quorum of masters report the same hold (the same mode, holder,
// and value; or a stranger's key), settled on one of them at least with
// the fencing token the others' do not exceed (see mergeViews), and that
// hold's holder, settled token and value are reported, so that the token
// is always the one the holder's lease has; its TTL is the time until
// fewer than a quorum of those masters would still hold it, and its
// waiters the most any master counts (each waiting driver subscribes on
// every master). A lock no quorum agrees on, a grant no master has settled
// yet among them, is reported free, with the highest token a free master
// issued. It fails when fewer than a quorum of masters answer.
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

// mergeViews is the majority's view of the masters' replies: the hold (or
// stranger's key) that a quorum of them report alike, at least one of them
// settled, or a free lock when there is none. The second phase settles a
// grant only on as many masters as a majority needs (see
// RedLock.secondPhase), so a master whose holds are all pending counts for
// the settled hold of the same mode, holder and value when its own token is
// no higher (the second phase only raises a hold's token, to the lease's)
// and that holder has one settled hold among the views; otherwise it counts
// for no hold, nor does a master that reports another hold. A grant that no
// master settled yet is not reported, and the token reported always comes
// from a master that settled it: the lease's.
func mergeViews(views []inspectView, quorum int) driver.Info {
	var out driver.Info
	groups := map[rlHold][]driver.Info{}
	var pending []driver.Info
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
		case in.Owner != "":
			pending = append(pending, in)
		}
	}
	for _, in := range pending {
		var join rlHold
		alike := 0
		for h := range groups {
			if !h.stranger && h.mode == in.Mode && h.owner == in.Owner && h.value == in.Value {
				join = h
				alike++
			}
		}
		if alike == 1 && in.Token <= join.token {
			groups[join] = append(groups[join], in)
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
