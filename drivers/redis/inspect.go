package redis

import (
	"context"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/driver"
)

// Inspect describes the lock on key in one pipelined round trip: its mode
// and number of holds, the holder (the reentrant owner, or the request ID;
// empty when several readers hold it), the highest fencing token of the
// holds (the latest issued when free), the exclusive holder's value
// (Request.Value) together with that hold's token, read by one script so
// that they describe one hold, the time left on the latest hold, and how
// many clients are subscribed to its release channel (waiting, or
// lingering for up to 2 s after their last waiter left). A key held by a
// stranger (another type, or an older layout) is reported held by an
// unknown owner, with its PTTL.
func (d *Driver) Inspect(ctx context.Context, key string) (driver.Info, error) {
	if err := d.enter(ctx); err != nil {
		return driver.Info{}, err
	}
	n := namesOf(d.prefix, key)
	if cc, ok := d.client.(*goredis.ClusterClient); ok {
		// The script goes to the lock's slot, the count to its shard.
		state := inspectScript.Eval(ctx, cc, []string{n.lock, n.fence()})
		if err := state.Err(); err != nil {
			return driver.Info{}, d.opErr(err)
		}
		waiters, err := clusterNumSub(ctx, cc, n.channel())
		if err != nil {
			return driver.Info{}, d.opErr(err)
		}
		return infoOf(state, waiters)
	}
	var state *goredis.Cmd
	var subs *goredis.MapStringIntCmd
	_, err := d.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		// EVAL, not EVALSHA: a pipeline cannot fall back, and inspection
		// is an operator's tool, not a hot path.
		state = inspectScript.Eval(ctx, p, []string{n.lock, n.fence()})
		subs = p.PubSubNumSub(ctx, n.channel())
		return nil
	})
	if err != nil && !errors.Is(err, goredis.Nil) {
		return driver.Info{}, d.opErr(err)
	}
	return infoOf(state, int(subs.Val()[n.channel()]))
}

// infoOf turns the inspect script's reply into an Info.
func infoOf(state *goredis.Cmd, waiters int) (driver.Info, error) {
	v, err := readInspect(state, waiters)
	return v.info, err
}

// inspectView is one server's reply to the inspect script.
type inspectView struct {
	info driver.Info
	// settled is false when every hold of the lock is pending: RedLock's
	// first phase wrote it and its second has not reached this master, so
	// its token may not be the lease's (see lua/inspect.lua).
	settled bool
	// stranger: the key holds something that is not a lock of this layout.
	stranger bool
}

// readInspect reads the inspect script's reply.
func readInspect(state *goredis.Cmd, waiters int) (inspectView, error) {
	v, err := state.Slice()
	if err != nil {
		return inspectView{}, err
	}
	if len(v) != 7 {
		return inspectView{}, fmt.Errorf("redis: inspect script returned %d values, want 7", len(v))
	}
	kind, _ := v[0].(string)
	holders, _ := v[1].(int64)
	holder, _ := v[2].(string)
	token, _ := v[3].(int64)
	ms, _ := v[4].(int64)
	value, _ := v[5].(string)
	settled, _ := v[6].(int64)
	out := inspectView{settled: settled == 1, stranger: kind == "other"}
	out.info = driver.Info{Waiters: waiters, Token: uint64(max(token, 0))}
	if kind == "free" {
		return out, nil
	}
	out.info.Held, out.info.Holders, out.info.Owner, out.info.Value = true, int(holders), holder, value
	if kind == "s" {
		out.info.Mode = driver.Shared
	}
	if ms > 0 {
		out.info.TTL = time.Duration(ms) * time.Millisecond
	}
	return out, nil
}
