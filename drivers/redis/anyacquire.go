package redis

import (
	"context"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/driver"
)

// AcquireAny takes the first free lock among reqs (driver.AnyAcquirer):
// one script, anyacquire.lua, tries the requests in order with
// acquire.lua's own code, and stops at the first grant, so the lease is
// exactly the one Acquire(reqs[i]) would have returned (same hash, hold,
// token block and queue rule) and Extend, Release, Transfer, ExtendBatch
// and Inspect treat it as such. When every lock is held it returns a
// *driver.LockedError whose RetryAfter is the soonest expiry among their
// holders.
//
// On a Cluster the locks of one call may live in different slots, and a
// script may only touch keys of one slot: consecutive requests of one slot
// form a group, and each group's script runs in turn, stopping at the
// first grant, so the requests are still tried in their order (a semaphore's
// permits, spread over the slots, then cost a request per run of permits
// in one slot, rather than one per permit).
//
// When a script's outcome is unknown (ctx ended or the connection failed
// after it was sent), or its grant was not acknowledged by enough replicas
// (WithReplicaAcks), every request of that script is released by its ID,
// with a context that outlives ctx but not the TTL, before the error is
// returned, as Acquire does for its one request. Requests of earlier
// groups were refused by a reply, and later groups were not sent, so
// neither can hold anything.
func (d *Driver) AcquireAny(ctx context.Context, reqs []driver.Request) (driver.Lease, int, error) {
	if err := d.enter(ctx); err != nil {
		return nil, 0, err
	}
	if len(reqs) == 0 {
		return nil, 0, errors.New("redis: AcquireAny with no requests")
	}
	ns := make([]names, len(reqs))
	ttls := make([]time.Duration, len(reqs))
	for i, req := range reqs {
		ns[i] = namesOf(d.prefix, req.Key)
		ttls[i] = req.TTL
	}
	c, acked := d.ackedFor(minTTL(ttls))
	var soonest time.Duration
	for _, g := range d.slotGroups(ns) {
		i, gr, err := anyAcquire(ctx, c, ns[g.lo:g.hi], reqs[g.lo:g.hi])
		if err == nil && gr.ok {
			err = acked.shortfall() // a grant a failover could lose is no grant
		}
		if err != nil {
			if (mayHaveApplied(err) || errors.Is(err, ErrNotReplicated)) && !d.closed.Load() {
				d.giveBack(ctx, ns[g.lo:g.hi], reqs[g.lo:g.hi])
			}
			return nil, 0, d.callErr(ctx, err)
		}
		if gr.ok {
			i += g.lo
			l := &lease{d: d, names: ns[i], id: reqs[i].ID}
			l.Start(gr.token, reqs[i].TTL)
			return l, i, nil
		}
		if gr.retry > 0 && (soonest == 0 || gr.retry < soonest) {
			soonest = gr.retry
		}
	}
	return nil, 0, &driver.LockedError{RetryAfter: soonest}
}

// span is the requests [lo, hi) of an AcquireAny call that one script
// tries.
type span struct{ lo, hi int }

// slotGroups splits the locks ns into the spans one script each can take:
// all of them on a single server, runs of one Cluster slot on a Cluster.
func (d *Driver) slotGroups(ns []names) []span {
	if _, ok := d.client.(*goredis.ClusterClient); !ok {
		return []span{{0, len(ns)}}
	}
	var groups []span
	for i := range ns {
		if i > 0 && keySlot(ns[i].lock) == keySlot(ns[i-1].lock) {
			groups[len(groups)-1].hi++
			continue
		}
		groups = append(groups, span{i, i + 1})
	}
	return groups
}

// giveBack releases every request of reqs by its ID: the grants of a
// script whose outcome is unknown. Each was exclusive and plain, so it
// never queued the Driver.
func (d *Driver) giveBack(ctx context.Context, ns []names, reqs []driver.Request) {
	var ttl time.Duration
	for _, req := range reqs {
		ttl = max(ttl, req.TTL)
	}
	cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), ttl)
	defer cancel()
	for i, req := range reqs {
		_, _ = release(cleanup, d.client, ns[i], req.ID, d.publish)
	}
}

// anyAcquire runs the anyacquire script for reqs, whose locks ns share one
// slot, on one server, and returns the index in reqs of its grant.
func anyAcquire(ctx context.Context, c goredis.Scripter, ns []names, reqs []driver.Request) (int, grant, error) {
	keys := make([]string, 0, 3*len(reqs))
	args := make([]any, 0, 10*len(reqs))
	for i, req := range reqs {
		keys = append(keys, ns[i].lock, ns[i].fence(), ns[i].waiters())
		args = append(args, acquireArgs(req, "", blockFor(req), false)...)
	}
	res, err := anyAcquireScript.Run(ctx, c, keys, args...).Int64Slice()
	if err != nil {
		return 0, grant{}, err
	}
	if len(res) != 4 {
		return 0, grant{}, fmt.Errorf("redis: anyacquire script returned %d values, want 4", len(res))
	}
	if res[0] != 1 {
		return 0, grant{retry: time.Duration(max(res[1], 0)) * time.Millisecond}, nil
	}
	i := int(res[3]) - 1
	if i < 0 || i >= len(reqs) {
		return 0, grant{}, fmt.Errorf("redis: anyacquire script granted request %d of %d", i+1, len(reqs))
	}
	return i, grant{ok: true, token: uint64(res[1]), again: res[2] == 1}, nil
}
