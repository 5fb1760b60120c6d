package zookeeper

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/driver"
)

// maxInspectReads bounds how many times Inspect lists the queue again after
// the holder it found left before its node could be read.
const maxInspectReads = 16

// errHolderChurn: Inspect found a different holder gone each time it looked.
var errHolderChurn = errors.New("zookeeper: the lock's holder kept changing while it was inspected")

// Inspect describes the lock key from its queue: after a sync (so that the
// server it asks has applied every write the leader had committed before),
// it lists the lock's directory and reads the node of the oldest holder
// (the first node when it is a writer, else the first of the readers ahead
// of the first writer), whose data and Stat come from one read: so its
// fencing token (the node's creating zxid), its Request.Value (in its data,
// written by the create; see data.go) and its owner (the reentrant owner,
// or the request ID) always describe that one hold. A reentrant hold
// reports the value of the request that created its node. When that node is
// gone by the time it is read (released, or its session ended, between the
// two reads), Inspect lists the queue again rather than report anything of
// another node with it. Owner is reported when there is one holder; Waiters
// counts the queue nodes behind the holders; TTL is zero, as a lock lasts
// as long as its session. A free lock's latest token is not kept, so Token
// is zero then. Nodes not named by dlock count as writers held by nobody
// known, without a value. While the client is disconnected Inspect fails at
// once with [ErrDisconnected].
func (d *Driver) Inspect(ctx context.Context, key string) (driver.Info, error) {
	if err := d.enter(ctx); err != nil {
		return driver.Info{}, err
	}
	dir := d.dirOf(key)
	for range maxInspectReads {
		if d.liveSession() == 0 {
			return driver.Info{}, ErrDisconnected
		}
		var children []string
		err := d.call(ctx, func() error {
			if _, err := d.conn.Sync(dir); err != nil {
				return err
			}
			var err error
			children, _, err = d.conn.Children(dir)
			return err
		})
		if errors.Is(err, zk.ErrNoNode) {
			return driver.Info{}, nil // no directory: nobody holds or waits
		}
		if err != nil {
			return driver.Info{}, err
		}
		info, gone, err := d.readHolder(ctx, dir, parseListing(children))
		if !gone {
			return info, err
		}
		// The holder left between the two reads: look again.
	}
	return driver.Info{}, fmt.Errorf("%w (%d reads)", errHolderChurn, maxInspectReads)
}

// readHolder describes the lock from lst, its directory's listing, and the
// node of its oldest holder, read now. gone reports that node missing: the
// listing is out of date, and nothing of it may be reported.
func (d *Driver) readHolder(ctx context.Context, dir string, lst listing) (info driver.Info, gone bool, err error) {
	if len(lst.queue) == 0 {
		return driver.Info{}, false, nil
	}
	info = driver.Info{Held: true, Holders: 1}
	first := lst.queue[0]
	if first.kind == kindReader {
		info.Mode = driver.Shared
		for info.Holders < len(lst.queue) && lst.queue[info.Holders].kind == kindReader {
			info.Holders++
		}
	}
	info.Waiters = len(lst.queue) - info.Holders
	var data []byte
	var stat *zk.Stat
	err = d.call(ctx, func() (err error) { data, stat, err = d.conn.Get(dir + "/" + first.name); return err })
	if errors.Is(err, zk.ErrNoNode) {
		return driver.Info{}, true, nil
	}
	if err != nil {
		return driver.Info{}, false, err
	}
	info.Token = uint64(stat.Czxid)
	n, ok := decodeData(data)
	if ok {
		info.Value = n.value
	}
	if info.Holders == 1 && !first.foreign {
		info.Owner = first.id
		if ok && n.owner != "" {
			info.Owner = n.owner
		}
	}
	return info, false, nil
}
