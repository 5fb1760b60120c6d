package etcd

import (
	"context"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock/driver"
)

// Inspect describes the lock key from its queue, read in one linearizable
// range request, without taking it: the holders (the oldest entry when it
// is exclusive, or the readers ahead of the oldest writer), their mode, the
// fencing token of the oldest holder, its owner (the reentrant owner, or
// the request ID, when there is one holder), and the entries waiting. A
// reentrant hold counts once, however many requests share it. TTL is zero:
// a lock lasts as long as its session (the driver's own deadline, which
// frees a lock its holder stops renewing, lives in the holder's process).
// A free lock's latest token is not kept, so Token is zero then.
func (d *Driver) Inspect(ctx context.Context, key string) (driver.Info, error) {
	if err := d.enter(ctx); err != nil {
		return driver.Info{}, err
	}
	n := namesOf(d.prefix, key)
	resp, err := d.cli.Get(ctx, n.queue, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return driver.Info{}, d.opErr(ctx, err)
	}
	info := driver.Info{Waiters: len(resp.Kvs)}
	if len(resp.Kvs) == 0 {
		return info, nil
	}
	first := string(resp.Kvs[0].Key)
	info.Held = true
	info.Token = uint64(resp.Kvs[0].CreateRevision)
	info.Holders = 1
	if strings.HasPrefix(first, n.readers) {
		info.Mode = driver.Shared
		for info.Holders < len(resp.Kvs) && strings.HasPrefix(string(resp.Kvs[info.Holders].Key), n.readers) {
			info.Holders++
		}
	}
	info.Waiters -= info.Holders
	if info.Holders == 1 {
		info.Owner = ownerOf(first[strings.LastIndexByte(first, '/')+1:])
	}
	return info, nil
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
