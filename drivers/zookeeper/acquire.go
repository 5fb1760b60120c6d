package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/driver"
)

// attempt is one Acquire call: a try, or (wait) a blocking one.
type attempt struct {
	d       *Driver
	req     driver.Request
	dir     string
	kind    byte
	tag     string
	wait    bool
	started time.Time
	waited  bool  // it waited (for a predecessor, or for the session)
	mine    *mine // our queue node, until it becomes a lease
}

// mine is the queue node an attempt created.
type mine struct {
	path  string
	sid   int64 // its session (Stat.EphemeralOwner once known)
	czxid int64 // 0 until read
}

// errVanished: a try's node disappeared before it could be looked at,
// again and again (someone deletes the lock's nodes by hand).
var errVanished = errors.New("zookeeper: the lock node disappeared as soon as it was created")

// dirOf returns the directory node of the lock key.
func (d *Driver) dirOf(key string) string { return d.base + "/" + escapeKey(key) }

func (d *Driver) acquire(ctx context.Context, req driver.Request, wait bool) (driver.Lease, error) {
	if err := d.enter(ctx); err != nil {
		return nil, err
	}
	if err := checkID(req.ID); err != nil {
		return nil, err
	}
	a := &attempt{
		d:       d,
		req:     req,
		dir:     d.dirOf(req.Key),
		kind:    kindWriter,
		tag:     ownerTag(req.Owner),
		wait:    wait,
		started: time.Now(),
	}
	if req.Mode == driver.Shared {
		a.kind = kindReader
	}
	l, err := a.run(ctx)
	if a.mine != nil {
		a.abandon(ctx)
	}
	if err != nil {
		return nil, err
	}
	return l, nil
}

func (a *attempt) run(ctx context.Context) (*lease, error) {
	d := a.d
	if a.req.Owner != "" {
		// A holder of the same owner lets us in at once, without queueing.
		if d.liveSession() == 0 {
			a.waited = true
			if err := a.awaitSession(ctx); err != nil {
				return nil, err
			}
		}
		var children []string
		err := d.call(ctx, func() (err error) { children, _, err = d.conn.Children(a.dir); return err })
		switch {
		case err == nil:
			if l, err := a.joinAny(ctx, parseListing(children)); l != nil || err != nil {
				return l, err
			}
		case errors.Is(err, zk.ErrNoNode):
		case !a.wait || !transient(err):
			return nil, err
		}
	}
	for vanished := 0; ; {
		if a.mine == nil {
			if err := a.create(ctx); err != nil {
				return nil, err
			}
		}
		sent := time.Now()
		lst, err := a.inspect(ctx)
		if err != nil {
			if !a.wait || !transient(err) {
				return nil, err
			}
			a.waited = true
			if _, err := d.waitSession(ctx); err != nil {
				return nil, err
			}
			continue
		}
		i := lst.find(a.req.ID)
		if i < 0 || a.mine.sid != d.conn.SessionID() {
			// Our node is gone: its session expired, or someone deleted it.
			a.mine = nil
			if vanished++; !a.wait && vanished > 2 {
				return nil, errVanished
			}
			continue
		}
		if lst.granted(i) {
			return a.grant(sent), nil
		}
		if a.req.Owner != "" {
			if l, err := a.joinAny(ctx, lst); l != nil || err != nil {
				return l, err
			}
		}
		if !a.wait {
			return nil, driver.ErrLocked
		}
		a.waited = true
		if err := a.waitFor(ctx, lst.predecessor(i)); err != nil {
			return nil, err
		}
	}
}

// validity returns the lease's validity counted from the start of the call,
// for a grant confirmed by a request sent at sent. A grant without waiting
// counts from the call's start. After a wait (for the lock, or for the
// session to come back), which may have lasted longer than a session
// timeout, it counts from the request that found the lock granted: the
// session was alive when the server received it, and lives a session timeout
// past it at least.
func (a *attempt) validity(sent time.Time) time.Duration {
	v := min(a.req.TTL, a.d.SessionTTL())
	if a.waited {
		v += sent.Sub(a.started)
	}
	return v
}

// grant turns our queue node, found at the head of the queue by a request
// sent at sent, into a lease.
func (a *attempt) grant(sent time.Time) *lease {
	m := a.mine
	a.mine = nil
	return a.d.newLease(&lease{
		path:  m.path,
		id:    a.req.ID,
		owned: a.req.Owner != "",
		sid:   m.sid,
		token: uint64(m.czxid),
	}, a.started, a.validity(sent))
}

// create makes our queue node, an EPHEMERAL_SEQUENTIAL child of the lock's
// directory named with the request ID. A create whose reply was lost may
// have been applied: the node is then found by its ID (after a sync, so that
// the server has applied whatever of ours was in flight), never waited on as
// someone else's, nor left behind.
func (a *attempt) create(ctx context.Context) error {
	d := a.d
	n := nodeData{owner: a.req.Owner, value: a.req.Value}
	if a.req.Owner != "" {
		n.ids = []string{a.req.ID}
	}
	data := encodeData(n)
	prefix := a.dir + "/" + queuePrefix(a.kind, a.req.ID, a.tag)
	for {
		if d.liveSession() == 0 {
			a.waited = true
			if err := a.awaitSession(ctx); err != nil {
				return err
			}
		}
		sid := d.conn.SessionID()
		var created string
		var czxid int64
		done := d.start(func() (err error) {
			created, czxid, err = a.createNode(prefix, data)
			return err
		})
		err := d.await(ctx, done)
		if stopped(err) {
			// The create runs on. Its reply is normally a moment away: wait
			// for it briefly, so that acquire deletes the node before it
			// returns; else the janitor removes whatever it makes.
			if !d.closed.Load() && d.liveSession() != 0 {
				timer := time.NewTimer(min(d.SessionTTL()/2, time.Second))
				select {
				case cerr := <-done:
					timer.Stop()
					if cerr == nil {
						a.mine = &mine{path: created, sid: sid}
					} else if !answered(cerr) && !unsent(cerr) {
						d.enqueue(job{dir: a.dir, id: a.req.ID})
					}
					return err
				case <-timer.C:
				}
			}
			go d.afterCreate(done, &created, a.dir, a.req.ID)
			return err
		}
		switch {
		case err == nil:
			a.mine = &mine{path: created, sid: sid}
			// The session's ID never comes back once it changed: the same
			// ID before the create and after its reply is the session the
			// create ran in, the node's owner. Else inspect reads both.
			if czxid != 0 && sid != 0 && d.conn.SessionID() == sid {
				a.mine.czxid = czxid
			}
			return nil
		case errors.Is(err, zk.ErrNoNode):
			if err := a.ensureDir(ctx); err != nil {
				return err
			}
			continue
		case answered(err):
			return err
		case unsent(err):
			continue
		}
		// The request may have been applied.
		if !a.wait {
			d.enqueue(job{dir: a.dir, id: a.req.ID})
			return err
		}
		a.waited = true
		if err := a.resolve(ctx); err != nil {
			if stopped(err) {
				d.enqueue(job{dir: a.dir, id: a.req.ID})
				return err
			}
			if !transient(err) {
				return err
			}
			continue
		}
		if a.mine != nil {
			return nil
		}
	}
}

// createNode creates our queue node, an EPHEMERAL_SEQUENTIAL child of the
// lock's directory whose name starts with prefix, and returns its path and
// the fencing token, its creating zxid, or 0 when that is not known.
//
// A create's reply carries no Stat (the client library does not send
// Create2), so the create goes in a multi with an empty write of the
// directory's data: a multi is one transaction, with one zxid, so the
// directory's Mzxid in the write's reply is the node's Czxid, and
// acquisitions do not need a read of their node's Stat besides. The
// directory's data is never used (it is empty, and nothing watches it).
// When the directory's ACL does not let this Driver write it, the server
// refuses the whole multi: the Driver then creates alone, as before, and
// reads the token with its first listing.
func (a *attempt) createNode(prefix string, data []byte) (string, int64, error) {
	d := a.d
	if !d.dirWriteRefused.Load() {
		res, err := d.conn.Multi(
			&zk.CreateRequest{Path: prefix, Data: data, Acl: d.acl, Flags: zk.FlagEphemeralSequential},
			&zk.SetDataRequest{Path: a.dir, Data: nil, Version: -1},
		)
		if err == nil && len(res) == 2 && res[1].Stat != nil {
			return res[0].String, res[1].Stat.Mzxid, nil
		}
		if err == nil {
			return "", 0, fmt.Errorf("zookeeper: a multi of 2 operations answered with %d results", len(res))
		}
		if !errors.Is(err, zk.ErrNoAuth) {
			return "", 0, err
		}
		d.dirWriteRefused.Store(true)
	}
	created, err := d.conn.Create(prefix, data, zk.FlagEphemeralSequential, d.acl)
	return created, 0, err
}

// awaitSession waits for the session to come back: for as long as ctx lets
// a blocking Acquire, and for at most one session timeout from its start a
// try, which then gives up with ErrDisconnected (the session has likely expired by
// then, and the caller should hear of the outage).
func (a *attempt) awaitSession(ctx context.Context) error {
	d := a.d
	if a.wait {
		_, err := d.waitSession(ctx)
		return err
	}
	limited, cancel := context.WithDeadline(ctx, a.started.Add(d.SessionTTL()))
	defer cancel()
	_, err := d.waitSession(limited)
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return ErrDisconnected
	}
	return err
}

// afterCreate waits for a create that its caller abandoned, and has the
// janitor remove what it made.
func (d *Driver) afterCreate(done <-chan error, created *string, dir, id string) {
	err := <-done
	switch {
	case err == nil:
		d.enqueue(job{path: *created})
	case answered(err), unsent(err):
	default:
		d.enqueue(job{dir: dir, id: id})
	}
}

// resolve looks for our queue node after a create whose reply was lost, once
// connected again, and sets a.mine when it finds it.
func (a *attempt) resolve(ctx context.Context) error {
	d := a.d
	if _, err := d.waitSession(ctx); err != nil {
		return err
	}
	var children []string
	err := d.call(ctx, func() error {
		if _, err := d.conn.Sync(a.dir); err != nil {
			return err
		}
		var err error
		children, _, err = d.conn.Children(a.dir)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	lst := parseListing(children)
	if i := lst.find(a.req.ID); i >= 0 {
		a.mine = &mine{path: a.dir + "/" + lst.queue[i].name, sid: d.conn.SessionID()}
	}
	return nil
}

// ensureDir creates the lock's directory, a container node that ZooKeeper
// deletes once it has no children left, and the base path above it.
func (a *attempt) ensureDir(ctx context.Context) error {
	d := a.d
	for tries := 0; ; tries++ {
		err := d.call(ctx, func() error {
			_, err := d.conn.CreateContainer(a.dir, nil, zk.FlagContainer, d.acl)
			return err
		})
		if err == nil || errors.Is(err, zk.ErrNodeExists) {
			return nil
		}
		if !errors.Is(err, zk.ErrNoNode) || tries > 0 {
			return err
		}
		if err := d.ensureBase(ctx); err != nil {
			return err
		}
	}
}

// ensureBase creates the base path's nodes, as persistent nodes.
func (d *Driver) ensureBase(ctx context.Context) error {
	for i := 1; i <= len(d.base); i++ {
		if i < len(d.base) && d.base[i] != '/' {
			continue
		}
		p := d.base[:i]
		err := d.call(ctx, func() error {
			_, err := d.conn.Create(p, nil, zk.FlagPersistent, d.acl)
			return err
		})
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	return nil
}

// inspect lists the lock's directory and, the first time, reads our node's
// Stat (its creating zxid is the fencing token, its ephemeral owner the
// session), both at once. A listing without our node means it is gone.
func (a *attempt) inspect(ctx context.Context) (listing, error) {
	d := a.d
	d.stats.lists.Add(1)
	var children []string
	listed := d.start(func() (err error) { children, _, err = d.conn.Children(a.dir); return err })
	var exists bool
	var stat *zk.Stat
	var statted <-chan error
	if a.mine.czxid == 0 {
		p := a.mine.path
		statted = d.start(func() (err error) { exists, stat, err = d.conn.Exists(p); return err })
	}
	err := d.await(ctx, listed)
	if statted != nil {
		err = firstErr(err, d.await(ctx, statted))
	}
	if errors.Is(err, zk.ErrNoNode) {
		return listing{}, nil // the directory is gone, and our node with it
	}
	if err != nil {
		return listing{}, err
	}
	if statted != nil {
		if !exists {
			return listing{}, nil
		}
		a.mine.czxid, a.mine.sid = stat.Czxid, stat.EphemeralOwner
	}
	return parseListing(children), nil
}

// waitFor waits until the node ahead of ours changes (it is deleted, in the
// normal case), or the session ends, with a watch on that node alone.
func (a *attempt) waitFor(ctx context.Context, pred node) error {
	d := a.d
	var events <-chan zk.Event
	p := a.dir + "/" + pred.name
	err := d.call(ctx, func() (err error) { _, _, events, err = d.conn.GetW(p); return err })
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return nil // gone already: look again
	case transient(err):
		_, err = d.waitSession(ctx)
		return err
	case err != nil:
		return err
	}
	select {
	case <-events:
		d.stats.wakeups.Add(1)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-d.closing:
		return driver.ErrClosed
	}
}

// abandon deletes our queue node when the attempt fails or gives up, so that
// nothing is left behind; the janitor finishes what it cannot.
func (a *attempt) abandon(ctx context.Context) {
	d := a.d
	m := a.mine
	a.mine = nil
	if d.closed.Load() && d.owned {
		return // closing the session deletes it
	}
	if d.liveSession() == 0 {
		d.enqueue(job{path: m.path})
		return
	}
	cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.SessionTTL()/2)
	defer cancel()
	err := d.call(cleanup, func() error { return d.conn.Delete(m.path, -1) })
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		d.enqueue(job{path: m.path})
	}
}

// joinAny joins the first holder in lst that a reentrant request of the same
// owner may join; it returns nil, nil when there is none.
func (a *attempt) joinAny(ctx context.Context, lst listing) (*lease, error) {
	for _, h := range lst.holders(a.kind, a.tag, a.req.ID) {
		if l, err := a.join(ctx, h); l != nil || err != nil {
			return l, err
		}
	}
	return nil, nil
}

// join adds our entry to the reentrant queue node h, whose owner holds the
// lock: one transaction adds our request ID to its data, guarded by its
// version, and creates our entry node, which ties the entry to our session.
// It returns nil, nil when h is gone or not of our owner.
func (a *attempt) join(ctx context.Context, h node) (*lease, error) {
	d := a.d
	anchor := a.dir + "/" + h.name
	entry := a.dir + "/" + entryName(a.req.ID, h.id)
	for {
		sent := time.Now()
		var data []byte
		var stat, entryStat *zk.Stat
		var entryExists bool
		got := d.start(func() (err error) { data, stat, err = d.conn.Get(anchor); return err })
		checked := d.start(func() (err error) { entryExists, entryStat, err = d.conn.Exists(entry); return err })
		err := firstErr(d.await(ctx, got), d.await(ctx, checked))
		switch {
		case errors.Is(err, zk.ErrNoNode):
			return nil, nil
		case transient(err) && a.wait:
			if _, err := d.waitSession(ctx); err != nil {
				return nil, err
			}
			continue
		case err != nil:
			return nil, err
		}
		n, ok := decodeData(data)
		if !ok || n.owner != a.req.Owner {
			return nil, nil
		}
		ids := n.ids
		if slices.Contains(ids, a.req.ID) && entryExists {
			// Joined (by an earlier attempt whose reply was lost, if not
			// this one).
			l := &lease{path: anchor, id: a.req.ID, entry: entry, owned: true,
				sid: entryStat.EphemeralOwner, token: uint64(stat.Czxid)}
			return d.newLease(l, a.started, a.validity(sent)), nil
		}
		if !slices.Contains(ids, a.req.ID) {
			ids = append(ids, a.req.ID)
		}
		ops := []any{&zk.SetDataRequest{Path: anchor, Data: encodeData(nodeData{owner: n.owner, value: n.value, ids: ids}), Version: stat.Version}}
		if !entryExists {
			ops = append(ops, &zk.CreateRequest{Path: entry, Acl: d.acl, Flags: zk.FlagEphemeral})
		}
		err = d.call(ctx, func() error { _, err := d.conn.Multi(ops...); return err })
		switch {
		case err == nil, errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNodeExists):
			continue // confirm (or look again) with the next Get
		case errors.Is(err, zk.ErrNoNode):
			return nil, nil
		case stopped(err):
			d.enqueue(job{dir: a.dir, id: a.req.ID})
			return nil, err
		case transient(err) && a.wait:
			continue
		case transient(err):
			d.enqueue(job{dir: a.dir, id: a.req.ID})
		}
		return nil, err
	}
}
