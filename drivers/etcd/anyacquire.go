package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock/driver"
)

// anyChain is how many requests one AcquireAny transaction tries. The
// requests are chained by nesting, If(first free) Then(put first)
// Else(If(second free) Then(put second) Else(...)), inside the session
// fence's transaction, and etcd's check of a transaction counts every level
// of nesting against --max-txn-ops (default 128): each level's allowance is
// its parent's less the parent's own operations, so under the default a
// chain of 127 fits in the fence's transaction and one of 128 is refused
// whole (ErrTooManyOps; measured on etcd 3.4). A server configured lower
// makes AcquireAny halve its chains until they fit.
const anyChain = 120

// AcquireAny takes the first free lock of reqs, in order, exactly as
// Acquire would take it without Block (driver.AnyAcquirer): each request's
// free-check and put are those of a non-blocking Acquire (acquirePlain),
// chained in one fenced transaction of up to anyChain requests, so a try of
// any number of permits up to anyChain costs one round trip, and longer
// lists one per anyChain requests, stopping at the first grant. The grant
// is the put's revision, as for Acquire: the same entry name, token and
// value, so plain Acquires and AcquireAny exclude each other.
//
// When every lock is held it returns driver.ErrLocked having written
// nothing: etcd does not tell when a holder's session ends, so there is no
// RetryAfter, as for Acquire. When a transaction fails in a way that may
// have been applied, every request's entry is deleted by its name, moving
// the session fence in the same transactions (see fence.go), before
// AcquireAny returns, as Acquire does.
func (d *Driver) AcquireAny(ctx context.Context, reqs []driver.Request) (driver.Lease, int, error) {
	if err := d.enter(ctx); err != nil {
		return nil, 0, err
	}
	if len(reqs) == 0 {
		return nil, 0, errors.New("etcd: AcquireAny without requests")
	}
	var ttl time.Duration
	for _, req := range reqs {
		if err := checkRequest(req); err != nil {
			return nil, 0, err
		}
		if req.Owner != "" || req.Block {
			return nil, 0, fmt.Errorf("etcd: AcquireAny takes plain non-blocking requests only (key %q)", req.Key)
		}
		ttl = max(ttl, req.TTL)
	}
	started := time.Now()
	sess, err := d.confirmedSession(ctx, started)
	if err != nil {
		return nil, 0, err
	}
	names := make([]string, len(reqs))
	for i, req := range reqs {
		names[i] = namesOf(d.prefix, req.Key).contender(req.Mode, sess.id, req.ID)
	}
	limit := anyChain
	for start := 0; start < len(reqs); {
		end := min(start+limit, len(reqs))
		i, rev, err := d.tryChain(ctx, sess, reqs[start:end], names[start:end])
		if errors.Is(err, rpctypes.ErrTooManyOps) && end-start > 1 {
			// Refused before it was proposed: nothing was written.
			limit = max(1, (end-start)/2)
			continue
		}
		if err != nil {
			err = sess.lostIfGone(err)
			d.tidy(ctx, sess, ttl, func(ctx context.Context) error { return d.deleteNames(ctx, sess, names) })
			return nil, 0, d.opErr(ctx, err)
		}
		if i >= 0 {
			i += start
			return d.newLease(reqs[i], names[i], rev, uint64(rev), sess, nil, started, started), i, nil
		}
		start = end
	}
	return nil, 0, driver.ErrLocked
}

// tryChain tries reqs in order in one fenced transaction, each request as
// acquirePlain's non-blocking try (its queue entry names[i] created only
// when no entry it would wait for exists), and returns the index of the
// request granted and the transaction's revision, or -1 when every lock
// was held (nothing was written then).
func (d *Driver) tryChain(ctx context.Context, sess *keeper, reqs []driver.Request, names []string) (int, int64, error) {
	free := func(i int) []clientv3.Cmp {
		blockers := namesOf(d.prefix, reqs[i].Key).blockers(reqs[i].Mode)
		return []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(blockers), "=", 0).WithPrefix()}
	}
	put := func(i int) []clientv3.Op {
		return []clientv3.Op{clientv3.OpPut(names[i], reqs[i].Value, clientv3.WithLease(sess.id))}
	}
	// Build the chain from its innermost level out: the last request is
	// tried only when every one before it was held.
	var els []clientv3.Op
	for i := len(reqs) - 1; i > 0; i-- {
		els = []clientv3.Op{clientv3.OpTxn(free(i), put(i), els)}
	}
	ok, resps, rev, err := d.fencedTxn(ctx, sess, free(0), put(0), els)
	if err != nil {
		return -1, 0, err
	}
	// Walk down the Else branches to the level that succeeded, if any.
	for i := 0; ; i++ {
		if ok {
			return i, rev, nil
		}
		if len(resps) == 0 {
			return -1, 0, nil
		}
		inner := resps[0].GetResponseTxn()
		if inner == nil {
			return -1, 0, fmt.Errorf("etcd: unexpected response at level %d of an AcquireAny transaction", i+1)
		}
		ok, resps = inner.Succeeded, inner.Responses
	}
}

// deleteNames deletes the queue entries names, which a failed AcquireAny
// may have created, moving sess's fence in the same transactions so that a
// put of the failed call applied later writes nothing (fence.go): the first
// transaction is what stops a late put, and every entry a put applied
// before it created is deleted by one of them. It is idempotent, for tidy
// to retry.
func (d *Driver) deleteNames(ctx context.Context, sess *keeper, names []string) error {
	limit := batchOps - 1 // fencedTidy adds the fence's put
	for start := 0; start < len(names); {
		end := min(start+limit, len(names))
		ops := make([]clientv3.Op, 0, end-start)
		for _, name := range names[start:end] {
			ops = append(ops, clientv3.OpDelete(name))
		}
		_, err := d.fencedTidy(ctx, sess, ops...)
		if errors.Is(err, rpctypes.ErrTooManyOps) && end-start > 1 {
			limit = max(1, (end-start)/2)
			continue
		}
		if err != nil {
			return err
		}
		start = end
	}
	return nil
}
