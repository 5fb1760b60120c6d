package redis

import (
	"context"
	"errors"
	"slices"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/driver"
)

// batchSize is how many extensions one pipeline carries: the core's renewal
// of n held locks costs about n/batchSize round trips per renewal period.
const batchSize = 1000

var errForeignLease = errors.New("redis: lease not made by this driver")

// ExtendBatch extends many leases with pipelined extend scripts, one round
// trip per batchSize of them. Each extension is the same owner-checked script
// as Lease.Extend, and reports its own result.
func (d *Driver) ExtendBatch(ctx context.Context, leases []driver.Lease, ttls []time.Duration) []error {
	if err := d.enter(ctx); err != nil {
		return slices.Repeat([]error{err}, len(leases))
	}
	errs := make([]error, len(leases))
	var items []extension
	var at []int // index in leases of each item
	for i, dl := range leases {
		l, ok := dl.(*lease)
		if !ok || l.d != d {
			errs[i] = errForeignLease
			continue
		}
		items = append(items, extension{names: l.names, id: l.id, ttl: ttls[i]})
		at = append(at, i)
	}
	c, acked := d.ackedFor(minTTL(ttls))
	results := extendPipelined(ctx, c, items)
	short := acked.shortfall() // of every chunk's WAIT
	for j, r := range results {
		i := at[j]
		switch {
		case r.err != nil:
			errs[i] = d.opErr(r.err)
		case !r.ok:
			errs[i] = driver.ErrNotHeld
		case short != nil:
			errs[i] = short
		default:
			leases[i].(*lease).SetValidity(ttls[i])
		}
	}
	return errs
}

// extension is one hold to extend in a pipeline, and outcome its result.
type extension struct {
	names names
	id    string
	ttl   time.Duration
}

type outcome struct {
	ok  bool
	err error
}

// extendPipelined runs the extend script for every item on one server, in
// pipelines of batchSize, and returns each item's outcome.
func extendPipelined(ctx context.Context, c goredis.UniversalClient, items []extension) []outcome {
	out := make([]outcome, len(items))
	for start := 0; start < len(items); start += batchSize {
		end := min(start+batchSize, len(items))
		extendChunk(ctx, c, items[start:end], out[start:end])
	}
	return out
}

func extendChunk(ctx context.Context, c goredis.UniversalClient, items []extension, out []outcome) {
	cmds := make([]*goredis.Cmd, len(items))
	pipeline := func(byHash bool) {
		_, _ = c.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i, it := range items {
				keys, args := []string{it.names.lock}, []any{it.id, millis(it.ttl)} // as extend does
				if byHash {
					cmds[i] = extendScript.EvalSha(ctx, p, keys, args...)
				} else {
					cmds[i] = extendScript.Eval(ctx, p, keys, args...)
				}
			}
			return nil
		})
	}
	pipeline(true)
	// After a restart the server has forgotten the script: send it in full.
	// Extending twice is harmless, so the whole chunk simply goes again.
	for _, cmd := range cmds {
		if goredis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			pipeline(false)
			break
		}
	}
	for i, cmd := range cmds {
		ok, err := cmd.Int64()
		out[i] = outcome{ok: err == nil && ok == 1, err: err}
	}
}
