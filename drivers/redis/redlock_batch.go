package redis

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// ExtendBatch extends many RedLock leases with one pipeline per master (per
// batchSize leases), sent to every master at once. Each lease is judged as
// Extend judges it: extended when a majority extended it within its
// validity, ErrNotHeld when no majority can still hold it.
func (r *RedLock) ExtendBatch(ctx context.Context, leases []driver.Lease, ttls []time.Duration) []error {
	if err := r.enter(ctx); err != nil {
		return slices.Repeat([]error{err}, len(leases))
	}
	errs := make([]error, len(leases))
	var items []extension
	var at []int
	shortest := time.Duration(0)
	for i, dl := range leases {
		l, ok := dl.(*rlLease)
		if !ok || l.r != r {
			errs[i] = errForeignLease
			continue
		}
		items = append(items, extension{names: l.names, id: l.id, ttl: ttls[i]})
		at = append(at, i)
		if shortest == 0 || ttls[i] < shortest {
			shortest = ttls[i]
		}
	}
	if len(items) == 0 {
		return errs
	}
	started := time.Now()
	// One round trip per chunk: give each master the per-master timeout
	// for each.
	timeout := r.nodeTimeout(shortest) * time.Duration(1+(len(items)-1)/batchSize)
	results := make([][]outcome, len(r.nodes))
	r.each(ctx, timeout, nil, func(ctx context.Context, i int, nd *rlNode) {
		results[i] = extendPipelined(ctx, nd.client, items)
	})
	for j, i := range at {
		ok, refused := 0, 0
		var nodeErrs []error
		for m, res := range results {
			switch o := res[j]; {
			case o.err != nil:
				nodeErrs = append(nodeErrs, fmt.Errorf("%s: %w", r.nodes[m].name, o.err))
			case o.ok:
				ok++
			default:
				refused++
			}
		}
		err := r.verdict(ok, refused, nodeErrs)
		if err == nil && !stillValid(started, ttls[i]) {
			err = fmt.Errorf("redis: redlock: a majority extended the lock, but only after %v of its %v TTL", time.Since(started).Round(time.Millisecond), ttls[i])
		}
		if err == nil {
			leases[i].(*rlLease).SetValidity(ttls[i])
		}
		errs[i] = err
	}
	return errs
}
