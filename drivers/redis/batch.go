package redis

import (
	"context"
	"errors"
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
	errs := make([]error, len(leases))
	if err := d.enter(ctx); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	for start := 0; start < len(leases); start += batchSize {
		end := min(start+batchSize, len(leases))
		d.extendChunk(ctx, leases[start:end], ttls[start:end], errs[start:end])
	}
	return errs
}

func (d *Driver) extendChunk(ctx context.Context, leases []driver.Lease, ttls []time.Duration, errs []error) {
	cmds := make([]*goredis.Cmd, len(leases))
	pipeline := func(byHash bool) {
		_, _ = d.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i, dl := range leases {
				l, ok := dl.(*lease)
				if !ok || l.d != d {
					errs[i] = errForeignLease
					continue
				}
				keys, args := []string{l.names.lock}, []any{l.id, millis(ttls[i])}
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
	for _, c := range cmds {
		if c != nil && goredis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
			pipeline(false)
			break
		}
	}
	for i, c := range cmds {
		if c == nil {
			continue
		}
		switch ok, err := c.Int64(); {
		case err != nil:
			errs[i] = d.opErr(err)
		case ok != 1:
			errs[i] = driver.ErrNotHeld
		default:
			leases[i].(*lease).validity.Store(int64(ttls[i]))
		}
	}
}

var _ driver.BatchExtender = (*Driver)(nil)
