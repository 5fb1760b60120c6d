package etcd

import (
	"context"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The session fence: how a request whose outcome is unknown is tidied for
// good.
//
// A transaction that puts a queue entry may still be applied by etcd after
// its caller gave up on it (its context ended, its reply was lost): etcd
// proposes a request it has read even when the client cancels it, and runs
// concurrent requests in no set order. A deletion of the entry by its name,
// sent after the failure, may then be applied before the put, and the entry
// would be left in the queue under the session lease, which the Driver
// keeps alive: the lock would stay held for as long as the Driver lives.
//
// So every transaction that creates an entry under a session also compares
// the mod revision of the session's fence key with the one this Driver last
// saw, and the tidying of an unknown outcome deletes the entry and puts the
// fence key in one transaction, which moves it. A put applied before the
// tidying is deleted by it; one applied after finds the fence moved and
// writes nothing. A transaction refused only because the fence moved (for
// another request of the Driver) is sent again with the new revision.

// fenceName is the fence key of the session lease: outside every lock's
// names, since an escaped key segment is never "%" alone.
func (d *Driver) fenceName(sess *keeper) string {
	return d.prefix + "/%/fence/" + leaseHex(sess.id)
}

// fencedTxn commits If(cmps) Then(then) Else(els) as one transaction that
// etcd applies only while sess's fence is where this Driver last saw it,
// sending it again whenever the fence has moved. It returns whether cmps
// held, the responses of then or els, and the transaction's revision.
func (d *Driver) fencedTxn(ctx context.Context, sess *keeper, cmps []clientv3.Cmp, then, els []clientv3.Op) (bool, []*etcdserverpb.ResponseOp, int64, error) {
	for {
		ok, resps, rev, moved, err := d.fencedTxnAt(ctx, sess, sess.fence.Load(), cmps, then, els)
		if err != nil || !moved {
			return ok, resps, rev, err
		}
		if err := ctx.Err(); err != nil {
			return false, nil, 0, err
		}
	}
}

// fencedTxnAt is one attempt of fencedTxn, applied only while the fence's
// mod revision is seen; moved reports that it was not, and then nothing was
// written.
func (d *Driver) fencedTxnAt(ctx context.Context, sess *keeper, seen int64, cmps []clientv3.Cmp, then, els []clientv3.Op) (ok bool, resps []*etcdserverpb.ResponseOp, rev int64, moved bool, err error) {
	fence := d.fenceName(sess)
	resp, err := d.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(fence), "=", seen)).
		Then(clientv3.OpTxn(cmps, then, els)).
		Else(clientv3.OpGet(fence, clientv3.WithKeysOnly())).
		Commit()
	if err != nil {
		return false, nil, 0, false, err
	}
	if resp.Succeeded {
		inner := resp.Responses[0].GetResponseTxn()
		return inner.Succeeded, inner.Responses, resp.Header.Revision, false, nil
	}
	var now int64 // 0: no fence key (a new session, or one lost)
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
		now = kvs[0].ModRevision
	}
	sess.fence.CompareAndSwap(seen, now) // unless another call moved it on
	return false, nil, 0, true, nil
}

// fencedTidy runs ops (deletions, reads) and moves sess's fence, in one
// transaction, so that no transaction sent before it under the fence can
// apply after it. It returns the transaction's responses to ops.
func (d *Driver) fencedTidy(ctx context.Context, sess *keeper, ops ...clientv3.Op) ([]*etcdserverpb.ResponseOp, error) {
	ops = append(ops[:len(ops):len(ops)], clientv3.OpPut(d.fenceName(sess), "", clientv3.WithLease(sess.id)))
	resp, err := d.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, err
	}
	sess.raiseFence(resp.Header.Revision)
	return resp.Responses, nil
}
