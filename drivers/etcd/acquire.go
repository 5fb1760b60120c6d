package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock/driver"
)

// errEntryGone is returned by Acquire when its queue entry vanished while it
// waited, while the session lease still looked alive: someone deleted it.
var errEntryGone = errors.New("etcd: the waiting request's queue entry was deleted by someone else")

// Acquire takes the lock. Without req.Block it tries once: one transaction
// creates this request's queue entry only when no entry it would have to
// wait for exists (etcd compares a whole range at once), so that a refusal
// writes nothing and costs one round trip; it returns driver.ErrLocked when
// the lock is held or waited for.
//
// With req.Block it queues for the lock and waits until every entry ahead
// of this request's is gone: it creates the entry and learns the entry just
// ahead in one transaction, then watches only that entry (no herd), so that
// etcd streams its deletion as it commits (see "How a lock works" in the
// package documentation). It returns when the lock is granted, when ctx
// ends (having deleted its entry), when the Driver closes
// (driver.ErrClosed), or when the session lease is lost while waiting (an
// error wrapping ErrSessionLost: the entry went with it, so waiting on would
// be waiting for nothing, etcd issue #19597; the error is transient, so the
// core's waiting Lock tries again, under a new session).
func (d *Driver) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	if err := d.enter(ctx); err != nil {
		return nil, err
	}
	if err := checkRequest(req); err != nil {
		return nil, err
	}
	started := time.Now()
	sess, err := d.confirmedSession(ctx, started)
	if err != nil {
		return nil, err
	}
	if req.Owner != "" {
		return d.acquireOwner(ctx, req, req.Block, sess, started)
	}
	return d.acquirePlain(ctx, req, req.Block, sess, started)
}

// checkRequest refuses requests the core would never send.
func checkRequest(req driver.Request) error {
	switch {
	case req.Key == "":
		return errors.New("etcd: empty key")
	case req.ID == "":
		return errors.New("etcd: empty request ID")
	case req.TTL <= 0:
		return fmt.Errorf("etcd: TTL %v is not positive", req.TTL)
	case req.Mode != driver.Exclusive && req.Mode != driver.Shared:
		return fmt.Errorf("etcd: unknown mode %d", req.Mode)
	}
	return nil
}

// confirmedSession returns the session to queue under, confirmed by a keepalive
// no older than a third of its TTL (usually the background one, so no round
// trip): a session whose keepalives fail must not take new locks.
func (d *Driver) confirmedSession(ctx context.Context, started time.Time) (*keeper, error) {
	for attempt := 0; ; attempt++ {
		k, err := d.session(ctx)
		if err != nil {
			return nil, err
		}
		err = k.confirm(ctx, started.Add(-k.ttl/3))
		if err == nil {
			return k, nil
		}
		if k.lost() == nil || d.closing() || attempt > 0 {
			return nil, d.opErr(ctx, err)
		}
		// Lost just now: the next call grants a new session.
	}
}

// acquirePlain queues req under sess, confirmed since started, and (when
// wait is set) waits until it holds the lock.
func (d *Driver) acquirePlain(ctx context.Context, req driver.Request, wait bool, sess *keeper, started time.Time) (driver.Lease, error) {
	n := namesOf(d.prefix, req.Key)
	me := n.contender(req.Mode, sess.id, req.ID)
	blockers := n.blockers(req.Mode)
	// The entry carries the request's value, written by the same put that
	// queues it: the grant (the entry's create revision, its token) and the
	// value are one revision, which Inspect reads together.
	put := clientv3.OpPut(me, req.Value, clientv3.WithLease(sess.id))

	if !wait {
		free := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(blockers), "=", 0).WithPrefix()}
		ok, _, rev, err := d.fencedTxn(ctx, sess, free, []clientv3.Op{put}, nil)
		if err != nil {
			err = sess.lostIfGone(err)
			d.abandon(ctx, sess, me, 0, req.TTL)
			return nil, d.opErr(ctx, err)
		}
		if !ok {
			return nil, driver.ErrLocked
		}
		return d.newLease(req, me, rev, uint64(rev), sess, nil, started, started), nil
	}

	// Create the entry and read the two entries just ahead of it at the same
	// revision: the first is what to wait for, the second tells whether the
	// first was already the holder.
	_, resps, rev, err := d.fencedTxn(ctx, sess, nil, []clientv3.Op{put, aheadOp(blockers, 0, 3)}, nil)
	if err != nil {
		err = sess.lostIfGone(err)
		d.abandon(ctx, sess, me, 0, req.TTL)
		return nil, d.opErr(ctx, err)
	}
	ahead := without(resps[1].GetResponseRange().Kvs, rev)
	w := &waiter{d: d, sess: sess, blockers: blockers, rev: rev, own: []owned{{me, rev}}}
	confirmed, err := w.wait(ctx, started, ahead, rev)
	if err != nil {
		d.abandon(ctx, sess, me, rev, req.TTL)
		return nil, markTransient(err)
	}
	return d.newLease(req, me, rev, uint64(rev), sess, nil, started, confirmed), nil
}

// aheadOp reads, newest first, up to limit entries of the range blockers
// created before revision below (every entry when below is 0).
func aheadOp(blockers string, below int64, limit int64, more ...clientv3.OpOption) clientv3.Op {
	opts := []clientv3.OpOption{
		clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend),
		clientv3.WithLimit(limit),
		clientv3.WithKeysOnly(),
	}
	if below > 0 {
		opts = append(opts, clientv3.WithMaxCreateRev(below-1))
	}
	return clientv3.OpGet(blockers, append(opts, more...)...)
}

// without returns kvs less the entry created at rev (the request's own).
func without(kvs []*mvccpb.KeyValue, rev int64) []*mvccpb.KeyValue {
	out := kvs[:0:0]
	for _, kv := range kvs {
		if kv.CreateRevision != rev {
			out = append(out, kv)
		}
	}
	return out
}

// abandon deletes the queue entry key of a request that will not hold the
// lock: an Acquire whose outcome is unknown (rev 0: the entry
// is deleted by its name, which no other request uses, and the session's
// fence moves in the same transaction, so that the put, should etcd apply
// it later, writes nothing: see fence.go), or a blocking Acquire that gave
// up waiting. An entry left behind would block the lock for as long as the
// session lives, which is as long as the Driver when all goes well, so the
// deletion is tried once before returning (outliving ctx, bounded by the
// TTL), then again in the background until it succeeds or the session ends.
func (d *Driver) abandon(ctx context.Context, sess *keeper, key string, rev int64, ttl time.Duration) {
	d.tidy(ctx, sess, ttl, func(ctx context.Context) error {
		if rev == 0 {
			_, err := d.fencedTidy(ctx, sess, clientv3.OpDelete(key))
			return err
		}
		_, err := removeContender(ctx, d.cli, key, rev)
		return err
	})
}

// tidy runs op, an idempotent deletion of what a request left behind under
// sess: once now, with a context that outlives ctx but not ttl, and then in
// the background, with backoff, until it succeeds, sess is lost (its lease
// then takes what is left) or the Driver closes (likewise: nobody keeps the
// lease alive any more).
func (d *Driver) tidy(ctx context.Context, sess *keeper, ttl time.Duration, op func(context.Context) error) {
	if sess.lost() != nil {
		return
	}
	first, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(ttl, time.Second))
	stop := context.AfterFunc(sess.ctx, cancel)
	err := op(first)
	stop()
	cancel()
	if err == nil {
		return
	}
	d.spawn(func() { retryTidy(sess, op) })
}

// retryTidy runs op until it succeeds or sess ends, with backoff.
func retryTidy(sess *keeper, op func(context.Context) error) {
	r := newRetry()
	for {
		ctx, cancel := context.WithTimeout(sess.ctx, max(sess.ttl/3, time.Second))
		err := op(ctx)
		cancel()
		if err == nil || r.Sleep(sess.ctx, nil) != nil {
			return
		}
	}
}
