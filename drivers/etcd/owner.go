package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock/driver"
)

// Reentrant holds.
//
// Every request of one owner (in one mode) shares one queue entry, the
// hold, whose name is derived from the owner, so that every client finds it.
// The hold lives under a lease of its own, which every client taking part
// keeps alive, so that it outlives any one client's session but not all of
// them. Each request adds a member entry under its own session; the last
// member to leave deletes the hold, in the same transaction that checks
// that no other member is left, and a request joins only while the hold
// still exists, so that a join and a last leave never both succeed. The
// fencing token is the hold's create revision, the same for every member.

// errHoldUnused ends the keeper of a hold's lease that no lease of this
// Driver needs any more (others may still keep it alive).
var errHoldUnused = errors.New("etcd: reentrant hold no longer used by this client")

// maxHoldAttempts bounds the retries of an owner's acquisition while the
// hold it found keeps vanishing or appearing under it.
const maxHoldAttempts = 10

// holdRef is a lease's membership of a reentrant hold.
type holdRef struct {
	name    string  // the hold's queue entry
	tok     int64   // its create revision
	members string  // the range of its member entries
	k       *keeper // keeps the hold's lease alive for this Driver
}

// intact is the comparison that holds while the hold is the one joined.
func (h *holdRef) intact() []clientv3.Cmp {
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(h.name), "=", h.tok),
		clientv3.Compare(clientv3.ModRevision(h.name), "=", h.tok),
	}
}

// leave deletes the member entry created at rev, and the hold with it when
// no other member is left, in one transaction. It reports whether the
// member was still part of the intact hold.
func (h *holdRef) leave(ctx context.Context, d *Driver, member string, rev int64) (bool, error) {
	mine := []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(member), "=", rev),
		clientv3.Compare(clientv3.ModRevision(member), "=", rev),
	}
	end := clientv3.GetPrefixRangeEnd(h.members)
	last := append(append(mine[:2:2], h.intact()...),
		clientv3.Compare(clientv3.CreateRevision(h.members), "=", 0).WithRange(member),
		clientv3.Compare(clientv3.CreateRevision(member+"\x00"), "=", 0).WithRange(end))
	del := clientv3.OpDelete(member)
	resp, err := d.cli.Txn(ctx).If(last...).Then(del, clientv3.OpDelete(h.name)).Else(
		clientv3.OpTxn(append(mine[:2:2], h.intact()...), []clientv3.Op{del}, []clientv3.Op{
			clientv3.OpTxn(mine, []clientv3.Op{del}, nil), // tidy up after a lost hold
		}),
	).Commit()
	if err != nil {
		return false, err
	}
	if resp.Succeeded {
		// Nothing lives under the hold's lease any more.
		id := h.k.id
		d.spawn(func() {
			ctx, cancel := context.WithTimeout(d.ctx, max(d.ttl, time.Second))
			defer cancel()
			_, _ = d.cli.Revoke(ctx, id)
		})
		return true, nil
	}
	return resp.Responses[0].GetResponseTxn().Succeeded, nil
}

// acquireOwner joins the owner's hold, or creates it, and (when wait is set)
// waits until the hold is the lock's holder. Without wait it joins only a
// hold that holds the lock, and creates one only when the lock is free. Its
// entry goes under sess, confirmed since started.
func (d *Driver) acquireOwner(ctx context.Context, req driver.Request, wait bool, sess *keeper, started time.Time) (driver.Lease, error) {
	n := namesOf(d.prefix, req.Key)
	name := n.ownerHold(req.Mode, req.Owner)
	blockers := n.blockers(req.Mode)
	for range maxHoldAttempts {
		resp, err := d.cli.Txn(ctx).Then(
			clientv3.OpGet(name),
			clientv3.OpGet(blockers, clientv3.WithPrefix(), clientv3.WithCountOnly()),
		).Commit()
		if err != nil {
			return nil, d.opErr(ctx, err)
		}
		var l driver.Lease
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
			hold := &holdRef{name: name, tok: kvs[0].CreateRevision, members: n.members(clientv3.LeaseID(kvs[0].Lease))}
			l, err = d.joinHold(ctx, req, n, sess, hold, clientv3.LeaseID(kvs[0].Lease), wait, started)
		} else {
			if !wait && resp.Responses[1].GetResponseRange().Count > 0 {
				return nil, driver.ErrLocked
			}
			l, err = d.createHold(ctx, req, n, sess, name, wait, started)
		}
		if !errors.Is(err, errHoldChanged) {
			return l, err
		}
	}
	return nil, fmt.Errorf("etcd: the reentrant hold of owner %q kept changing under %d attempts; try again", req.Owner, maxHoldAttempts)
}

// errHoldChanged: the hold appeared or vanished between the read and the
// write; the acquisition starts again.
var errHoldChanged = errors.New("etcd: reentrant hold changed")

// joinHold adds a member to an existing hold.
func (d *Driver) joinHold(ctx context.Context, req driver.Request, n lockNames, sess *keeper, hold *holdRef, holdLease clientv3.LeaseID, wait bool, started time.Time) (driver.Lease, error) {
	hk, err := d.useHold(ctx, holdLease)
	if err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return nil, errHoldChanged // the hold is going with its lease
		}
		return nil, d.opErr(ctx, err)
	}
	hold.k = hk
	member := n.member(holdLease, sess.id, req.ID)
	blockers := n.blockers(req.Mode)
	cmps := hold.intact()
	then := []clientv3.Op{clientv3.OpPut(member, "", clientv3.WithLease(sess.id))}
	if wait {
		then = append(then, aheadOp(blockers, hold.tok, 2))
	} else {
		// Join only a hold that holds the lock: nothing older blocks it.
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(blockers), ">", hold.tok-1).WithPrefix())
	}
	ok, resps, mrev, err := d.fencedTxn(ctx, sess, cmps, then, []clientv3.Op{clientv3.OpGet(hold.name)})
	if err != nil {
		err = sess.lostIfGone(err)
		d.abandonMember(ctx, sess, hold, member, 0, req.TTL)
		d.unuseHold(hk)
		return nil, d.opErr(ctx, err)
	}
	if !ok {
		d.unuseHold(hk)
		kvs := resps[0].GetResponseRange().Kvs
		if !wait && len(kvs) == 1 && kvs[0].CreateRevision == hold.tok {
			return nil, driver.ErrLocked // the owner's hold is itself waiting
		}
		return nil, errHoldChanged
	}
	confirmed := started
	if wait {
		ahead := resps[1].GetResponseRange().Kvs
		if confirmed, err = d.waitHold(ctx, req, sess, hold, member, mrev, ahead, mrev, started); err != nil {
			return nil, err
		}
	}
	return d.newLease(req, member, mrev, uint64(hold.tok), sess, hold, started, confirmed), nil
}

// createHold creates the owner's hold, under a new lease, with its first
// member.
func (d *Driver) createHold(ctx context.Context, req driver.Request, n lockNames, sess *keeper, name string, wait bool, started time.Time) (driver.Lease, error) {
	hk, err := d.newHold(ctx)
	if err != nil {
		return nil, err
	}
	members := n.members(hk.id)
	member := n.member(hk.id, sess.id, req.ID)
	blockers := n.blockers(req.Mode)
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(name), "=", 0)}
	then := []clientv3.Op{
		clientv3.OpPut(name, req.Value, clientv3.WithLease(hk.id)), // the first request's value is the hold's
		clientv3.OpPut(member, "", clientv3.WithLease(sess.id)),
	}
	if wait {
		then = append(then, aheadOp(blockers, 0, 3))
	} else {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(blockers), "=", 0).WithPrefix())
	}
	resp, err := d.cli.Txn(ctx).If(cmps...).Then(then...).Else(clientv3.OpGet(name)).Commit()
	if err != nil || !resp.Succeeded {
		// Revoking the new lease deletes the hold if it was created after
		// all; the member goes by its name, which nobody else uses.
		d.dropNewHold(ctx, sess, hk, member, req.TTL)
		if err != nil {
			return nil, d.opErr(ctx, err)
		}
		if !wait && len(resp.Responses[0].GetResponseRange().Kvs) == 0 {
			return nil, driver.ErrLocked
		}
		return nil, errHoldChanged
	}
	tok := resp.Header.Revision
	hold := &holdRef{name: name, tok: tok, members: members, k: hk}
	confirmed := started
	if wait {
		ahead := without(resp.Responses[2].GetResponseRange().Kvs, tok)
		if confirmed, err = d.waitHold(ctx, req, sess, hold, member, tok, ahead, tok, started); err != nil {
			return nil, err
		}
	}
	return d.newLease(req, member, tok, uint64(tok), sess, hold, started, confirmed), nil
}

// waitHold waits until the hold holds the lock. On failure it leaves the
// hold and returns why.
func (d *Driver) waitHold(ctx context.Context, req driver.Request, sess *keeper, hold *holdRef, member string, mrev int64, ahead []*mvccpb.KeyValue, at int64, started time.Time) (time.Time, error) {
	w := &waiter{d: d, sess: sess, hold: hold.k, blockers: namesOf(d.prefix, req.Key).blockers(req.Mode), rev: hold.tok,
		own: []owned{{member, mrev}, {hold.name, hold.tok}}}
	confirmed, err := w.wait(ctx, started, ahead, at)
	if err != nil {
		d.abandonMember(ctx, sess, hold, member, mrev, req.TTL)
		d.unuseHold(hold.k)
		return time.Time{}, markTransient(err)
	}
	return confirmed, nil
}

// abandonMember leaves the hold for a request that will not hold the lock
// (rev 0: its outcome is unknown, so the member is found by name first).
// Like abandon, it insists until it is done or the session ends.
func (d *Driver) abandonMember(ctx context.Context, sess *keeper, hold *holdRef, member string, rev int64, ttl time.Duration) {
	d.tidy(ctx, sess, ttl, func(ctx context.Context) error {
		mrev := rev
		if mrev == 0 {
			// Move the fence first: a join applied later writes nothing.
			resps, err := d.fencedTidy(ctx, sess, clientv3.OpGet(member))
			if err != nil {
				return err
			}
			kvs := resps[0].GetResponseRange().Kvs
			if len(kvs) == 0 {
				return nil
			}
			mrev = kvs[0].CreateRevision
		}
		_, err := hold.leave(ctx, d, member, mrev)
		return err
	})
}

// dropNewHold undoes createHold's lease when the hold was not created (or
// may have been, when the outcome is unknown): revoking the lease deletes
// the hold if it exists, and the member goes by its name.
func (d *Driver) dropNewHold(ctx context.Context, sess *keeper, hk *keeper, member string, ttl time.Duration) {
	d.unuseHold(hk)
	d.tidy(ctx, sess, ttl, func(ctx context.Context) error {
		if _, err := d.cli.Revoke(ctx, hk.id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return err
		}
		_, err := d.cli.Delete(ctx, member)
		return err
	})
}

// newHold grants the lease of a new hold, with the Driver's session TTL,
// and keeps it alive for one user.
func (d *Driver) newHold(ctx context.Context) (*keeper, error) {
	k, err := d.grant(ctx, d.ttl, false)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	k.users = 1
	d.holds[k.id] = k
	d.mu.Unlock()
	return k, nil
}

// useHold returns this Driver's keeper of a hold's lease, starting one when
// there is none, confirmed alive by a keepalive sent from now on (an error
// wrapping rpctypes.ErrLeaseNotFound when it is gone).
func (d *Driver) useHold(ctx context.Context, id clientv3.LeaseID) (*keeper, error) {
	started := time.Now()
	d.mu.Lock()
	k := d.holds[id]
	if k != nil && k.lost() == nil {
		k.users++
		d.mu.Unlock()
		if err := k.confirm(ctx, started); err != nil {
			d.unuseHold(k)
			if k.lost() != nil {
				return nil, rpctypes.ErrLeaseNotFound
			}
			return nil, err
		}
		return k, nil
	}
	d.mu.Unlock()
	resp, err := d.cli.KeepAliveOnce(ctx, id)
	if err != nil {
		return nil, err
	}
	k, ok := d.newKeeper(id, time.Duration(resp.TTL)*time.Second, started, false)
	if !ok {
		return nil, driver.ErrClosed
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if other := d.holds[id]; other != nil && other.lost() == nil {
		// Another request of this Driver started one meanwhile.
		other.users++
		k.lose(errHoldUnused)
		return other, nil
	}
	k.users = 1
	d.holds[id] = k
	return k, nil
}

// unuseHold releases one use of a hold's keeper, and stops the keeper (not
// the lease, which other clients may keep alive) after the last.
func (d *Driver) unuseHold(k *keeper) {
	d.mu.Lock()
	k.users--
	last := k.users <= 0
	if last && d.holds[k.id] == k {
		delete(d.holds, k.id)
	}
	d.mu.Unlock()
	if last {
		k.lose(errHoldUnused)
	}
}
