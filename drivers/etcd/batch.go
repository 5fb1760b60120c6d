package etcd

import (
	"context"
	"errors"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock/driver"
)

// batchOps is how many reads one renewal transaction carries, within etcd's
// default limit of 128 operations per transaction (--max-txn-ops); a server
// configured lower makes the driver halve its batches until they fit.
const batchOps = 120

var errForeignLease = errors.New("etcd: lease not made by this driver")

// ExtendBatch extends many leases with one keepalive confirmation per etcd
// lease they live under (usually none: the background keepalive is recent)
// and one read-only transaction per batchOps keys, which reads every key
// and checks, for each lease on its own, that its keys still have the
// grant's create and mod revisions, as Extend's comparison does. A
// transaction that fails reports its error for its own leases only.
func (d *Driver) ExtendBatch(ctx context.Context, leases []driver.Lease, ttls []time.Duration) []error {
	if err := d.enter(ctx); err != nil {
		return slices.Repeat([]error{err}, len(leases))
	}
	errs := make([]error, len(leases))
	started := time.Now()
	var items []*lease
	var at []int // index in leases of each item
	var ks []*keeper
	for i, dl := range leases {
		l, ok := dl.(*lease)
		switch {
		case !ok || l.d != d:
			errs[i] = errForeignLease
			continue
		case l.extendable() != nil:
			errs[i] = driver.ErrNotHeld
			continue
		}
		items = append(items, l)
		at = append(at, i)
		ks = append(ks, l.keepers()...)
	}
	// Confirm each etcd lease once; a failure concerns only its leases.
	failed := map[*keeper]error{}
	for _, k := range ks {
		if _, seen := failed[k]; seen {
			continue
		}
		failed[k] = k.confirm(ctx, started.Add(-k.ttl/3))
	}
	var check []*lease
	var checkAt []int
	for j, l := range items {
		var err error
		for _, k := range l.keepers() {
			if err = failed[k]; err != nil {
				break
			}
		}
		if err != nil {
			errs[at[j]] = l.keeperFailed(ctx, err)
			continue
		}
		check = append(check, l)
		checkAt = append(checkAt, at[j])
	}
	oks, cerrs := d.checkOwned(ctx, check)
	for j, l := range check {
		i := checkAt[j]
		if cerrs[j] != nil {
			errs[i] = d.opErr(ctx, cerrs[j])
			continue
		}
		errs[i] = l.extended(oks[j], started, ttls[i])
	}
	return errs
}

// checkOwned reads the keys of every lease, batchOps at a time, and reports
// for each lease whether all its keys still have their grant's revisions,
// or the error of the transaction that read them.
func (d *Driver) checkOwned(ctx context.Context, ls []*lease) ([]bool, []error) {
	oks := make([]bool, len(ls))
	errs := make([]error, len(ls))
	limit := batchOps
	for start := 0; start < len(ls); {
		end, n := start, 0
		for end < len(ls) && (end == start || n+len(ls[end].owned()) <= limit) {
			n += len(ls[end].owned())
			end++
		}
		err := d.checkChunk(ctx, ls[start:end], oks[start:end])
		if errors.Is(err, rpctypes.ErrTooManyOps) && end-start > 1 {
			limit = max(1, n/2) // the server's limit is lower: halve and retry
			continue
		}
		for j := start; j < end; j++ {
			errs[j] = err
		}
		start = end
	}
	return oks, errs
}

// checkChunk reads the keys of ls in one read-only transaction.
func (d *Driver) checkChunk(ctx context.Context, ls []*lease, oks []bool) error {
	var ops []clientv3.Op
	for _, l := range ls {
		for _, o := range l.owned() {
			ops = append(ops, clientv3.OpGet(o.key, clientv3.WithKeysOnly()))
		}
	}
	resp, err := d.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return err
	}
	k := 0
	for j, l := range ls {
		oks[j] = true
		for _, o := range l.owned() {
			kvs := resp.Responses[k].GetResponseRange().Kvs
			k++
			if len(kvs) != 1 || kvs[0].CreateRevision != o.rev || kvs[0].ModRevision != o.rev {
				oks[j] = false
			}
		}
	}
	return nil
}
