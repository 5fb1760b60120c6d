package etcd

import (
	"context"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock/driver"
)

// Inspect describes the lock key from its queue, read in one linearizable
// transaction, so at one revision, without taking it: the holders (the
// oldest entry when it is exclusive, or the readers ahead of the oldest
// writer), their mode, the fencing token of the oldest holder, its owner
// (the reentrant owner, or the request ID, when there is one holder) and
// its value (when there is one holder), and the entries waiting. A
// reentrant hold counts once, however many requests share it. TTL is zero:
// a lock lasts as long as its session (the driver's own deadline, which
// frees a lock its holder stops renewing, lives in the holder's process).
// A free lock's latest token is not kept, so Token is zero then.
//
// The value and the token come from the same entry at the same revision:
// the token is the entry's create revision, and the value is the one the
// put that created it wrote (see acquirePlain), reported only while the
// entry is unmodified since (someone who overwrote it with etcdctl wrote
// no grant's value).
func (d *Driver) Inspect(ctx context.Context, key string) (driver.Info, error) {
	if err := d.enter(ctx); err != nil {
		return driver.Info{}, err
	}
	n := namesOf(d.prefix, key)
	// The whole queue by name alone, and the oldest entry with its value:
	// waiters' values are of no use here.
	resp, err := d.cli.Txn(ctx).Then(
		clientv3.OpGet(n.queue, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)),
		clientv3.OpGet(n.queue, clientv3.WithFirstCreate()...),
	).Commit()
	if err != nil {
		return driver.Info{}, d.opErr(ctx, err)
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	info := driver.Info{Waiters: len(kvs)}
	if len(kvs) == 0 {
		return info, nil
	}
	first := string(kvs[0].Key)
	info.Held = true
	info.Token = uint64(kvs[0].CreateRevision)
	info.Holders = 1
	if strings.HasPrefix(first, n.readers) {
		info.Mode = driver.Shared
		for info.Holders < len(kvs) && strings.HasPrefix(string(kvs[info.Holders].Key), n.readers) {
			info.Holders++
		}
	}
	info.Waiters -= info.Holders
	if info.Holders == 1 {
		info.Owner = ownerOf(first[strings.LastIndexByte(first, '/')+1:])
		info.Value = valueOf(resp.Responses[1].GetResponseRange().Kvs, kvs[0])
	}
	return info, nil
}

// valueOf returns the value of the entry holder, found in kvs (the oldest
// entry with its value, read in the same transaction), when the put that
// created the entry, and so granted its token, wrote it.
func valueOf(kvs []*mvccpb.KeyValue, holder *mvccpb.KeyValue) string {
	if len(kvs) != 1 || string(kvs[0].Key) != string(holder.Key) ||
		kvs[0].CreateRevision != holder.CreateRevision || kvs[0].ModRevision != kvs[0].CreateRevision {
		return ""
	}
	return string(kvs[0].Value)
}

// ownerOf returns who a queue entry's name says it is: the owner of a
// reentrant hold ("@OWNER"), or the request ID ("LEASE-ID").
func ownerOf(name string) string {
	var s string
	if owner, ok := strings.CutPrefix(name, "@"); ok {
		s = owner
	} else if _, id, ok := strings.Cut(name, "-"); ok {
		s = id
	}
	if u, ok := unescape(s); ok {
		return u
	}
	return s
}
