package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/deadline"
)

// lease is one hold of a lock: the Driver's own queue node, or (for a
// reentrant request that joined a holder of the same owner) an entry in
// another request's queue node, its anchor.
//
// A held lease costs no timer and no context: its validity lapses in the
// Driver's queue of deadlines, and the Driver's set of leases is what it
// tells when the session ends.
type lease struct {
	d     *Driver
	path  string // the queue node that holds the lock, in the lock's directory
	id    string // the request ID
	entry string // our entry node, when we joined another request's node
	sid   int64  // the session whose ephemeral node (path or entry) we rest on
	token uint64
	owned bool // path is a reentrant (owner) node, released entry by entry

	// Under mu (the flags first, packed with owned).
	ended    bool // lost, lapsed or released: no longer ours to extend
	released bool // Release was called
	mu       sync.Mutex
	validity time.Duration
	until    time.Time              // the start of the last confirmation + validity
	lapse    deadline.Entry[*lease] // in the Driver's lapse queue, at until
	reason   error                  // why it was lost, once it was
	onLoss   func(error)            // the core's (OnLoss); nil once told, and after Release
}

// dir returns the lock's directory, the parent of its queue node: derived,
// not kept, as a held lock should cost little memory.
func (l *lease) dir() string { return l.path[:strings.LastIndexByte(l.path, '/')] }

var _ driver.Lease = (*lease)(nil)

// newLease makes a held lease valid for validity from started, and registers
// it with the Driver, which reports its loss when the session ends.
func (d *Driver) newLease(l *lease, started time.Time, validity time.Duration) *lease {
	l.d = d
	l.mu.Lock()
	l.validity, l.until = validity, started.Add(validity)
	d.lapses.Schedule(&l.lapse, l, l.until)
	l.mu.Unlock()
	// The monitor may not have seen the session this lease rests on yet.
	d.observe()
	d.mu.Lock()
	ended := d.sid != l.sid
	if !ended {
		d.leases[l] = struct{}{}
	}
	d.mu.Unlock()
	if ended {
		// The session ended between the grant and now: the monitor has
		// already looked for this lease's fellows.
		l.lose(ErrSessionExpired)
	}
	return l
}

// Token returns the zxid that created the queue node holding the lock (its
// Stat.Czxid). See "Guarantees" in the package documentation.
func (l *lease) Token() uint64 { return l.token }

// Validity is at most the session timeout: a client cut off from the
// ensemble cannot know whether its session still lives once that has passed
// since it was last heard.
func (l *lease) Validity() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.validity
}

// OnLoss calls f when the session ends, when the Driver is closed, when the
// lease goes unconfirmed past its validity, and when an Extend finds its
// node gone: at once, when one of these already happened.
func (l *lease) OnLoss(f func(reason error)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.released:
	case l.reason != nil:
		f(l.reason)
	case !l.ended:
		l.onLoss = f
	}
}

// lost marks l ended, lost for reason, and returns the core's callback to
// call with it (nil when there is none, or l had already ended). Callers
// hold l.mu.
func (l *lease) lost(reason error) func(error) {
	if l.ended {
		return nil
	}
	l.ended, l.reason = true, reason
	l.d.lapses.Remove(&l.lapse)
	f := l.onLoss
	l.onLoss = nil
	return f
}

// Uncertain reports ErrDisconnected while the client is cut off from the
// ensemble, and the session's end once the client has learnt of it.
func (l *lease) Uncertain() error {
	if state := l.d.conn.State(); state != zk.StateHasSession {
		return fmt.Errorf("%w (connection state %v, session 0x%x)", ErrDisconnected, state, l.sid)
	}
	if l.d.conn.SessionID() != l.sid {
		return ErrSessionExpired
	}
	return nil
}

// Extend confirms, in one linearizable request through the ensemble's
// leader, that the session is alive and the lock's node (and our entry node,
// for a joined reentrant hold) still exists. Node names carry the request
// ID, so the check is owner-checked. It changes nothing on the server: the
// session's own pings keep it alive while the client is connected. While the
// client is disconnected it fails at once with ErrDisconnected.
func (l *lease) Extend(ctx context.Context, ttl time.Duration) error {
	d := l.d
	if err := d.enter(ctx); err != nil {
		return err
	}
	if err := l.extendable(); err != nil {
		return err
	}
	started := time.Now()
	checks := l.checks()
	err := d.call(ctx, func() error {
		_, err := d.conn.Multi(checks...)
		return err
	})
	return l.checked(err, started, ttl)
}

// extendable returns nil when l may be extended now, and otherwise what
// Extend returns without asking the server: ErrNotHeld for a lease that
// ended or whose session did (losing it), ErrDisconnected while the client
// is cut off, since a request would wait for the next connection.
func (l *lease) extendable() error {
	l.mu.Lock()
	ended := l.ended
	l.mu.Unlock()
	if ended {
		return driver.ErrNotHeld
	}
	if l.d.conn.SessionID() != l.sid {
		l.lose(ErrSessionExpired)
		return driver.ErrNotHeld
	}
	if l.d.conn.State() != zk.StateHasSession {
		return ErrDisconnected
	}
	return nil
}

// checks returns the multi operations that confirm l: a check of its lock
// node, and of its entry node when it joined another request's node.
func (l *lease) checks() []any {
	checks := []any{&zk.CheckVersionRequest{Path: l.path, Version: -1}}
	if l.entry != "" {
		checks = append(checks, &zk.CheckVersionRequest{Path: l.entry, Version: -1})
	}
	return checks
}

// checked finishes an extension whose checks were sent at started and
// failed with err (nil: they passed). A node that is gone, or a session
// that is, loses the lease; success makes it valid for ttl (at most the
// session timeout) from started.
func (l *lease) checked(err error, started time.Time, ttl time.Duration) error {
	d := l.d
	switch {
	case err == nil:
	case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrSessionExpired):
		l.lose(fmt.Errorf("zookeeper: lock node %s is gone: %w", l.path, driver.ErrNotHeld))
		if l.entry != "" {
			d.enqueue(job{path: l.entry, sid: l.sid})
		}
		return driver.ErrNotHeld
	default:
		return err
	}
	validity := min(ttl, d.SessionTTL())
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return driver.ErrNotHeld
	}
	l.validity, l.until = validity, started.Add(validity)
	l.d.lapses.Schedule(&l.lapse, l, l.until)
	return nil
}

// Release removes the lease's hold, owner-checked: the node named with its
// request ID, or its entry in a reentrant node. When it cannot be done now
// (the client is disconnected: ErrDisconnected at once) or its outcome
// cannot be known (the reply was lost, ctx ended), the Driver finishes it in
// the background once connected, so that nothing outlives the lease.
func (l *lease) Release(ctx context.Context) error {
	d := l.d
	if d.closed.Load() {
		return driver.ErrClosed
	}
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return driver.ErrNotHeld
	}
	l.released, l.ended = true, true
	l.onLoss = nil // the core no longer listens
	d.lapses.Remove(&l.lapse)
	l.mu.Unlock()
	d.forget(l)
	if err := ctx.Err(); err != nil {
		d.enqueue(job{lease: l, sid: l.sid})
		return err
	}
	if d.liveSession() == 0 {
		// Unlock must not hang for the length of an outage.
		d.enqueue(job{lease: l, sid: l.sid})
		return ErrDisconnected
	}
	err := l.remove(ctx, false)
	if err != nil && !errors.Is(err, driver.ErrNotHeld) && !errors.Is(err, driver.ErrClosed) {
		d.enqueue(job{lease: l, sid: l.sid})
	}
	return err
}

// expire runs when the lease's deadline comes in the lapse queue: unless a
// confirmation moved it meanwhile, the validity passed unconfirmed, so the
// lease is lost, and the Driver removes its node, as a TTL would on a lease
// backend, so that the lock frees within the TTL although the session lives
// on.
func (l *lease) expire() {
	l.mu.Lock()
	if !l.ended && time.Now().Before(l.until) {
		l.d.lapses.Schedule(&l.lapse, l, l.until)
		l.mu.Unlock()
		return
	}
	ended := l.ended
	f := l.lost(errLapsed)
	l.mu.Unlock()
	if ended {
		return
	}
	l.d.forget(l)
	if f != nil {
		f(errLapsed)
	}
	l.d.enqueue(job{lease: l, sid: l.sid})
}

// lose ends the lease as lost, for reason.
func (l *lease) lose(reason error) {
	l.mu.Lock()
	ended := l.ended
	f := l.lost(reason)
	l.mu.Unlock()
	if ended {
		return
	}
	l.d.forget(l)
	if f != nil {
		f(reason)
	}
}

// remove takes the lease's hold off the server, owner-checked. It returns
// ErrNotHeld when the hold was already gone, and nil when this call (or an
// earlier attempt whose reply was lost) removed it. A patient remove waits
// for the session to come back after a connection failure (bounded by ctx);
// an impatient one returns the failure.
func (l *lease) remove(ctx context.Context, patient bool) error {
	d := l.d
	tried := false // an attempt may have been applied
	for {
		if d.conn.SessionID() != l.sid {
			// The session ended, and our ephemeral node with it.
			return driver.ErrNotHeld
		}
		var err error
		if l.owned {
			err = l.removeEntry(ctx)
		} else {
			err = d.call(ctx, func() error { return d.conn.Delete(l.path, -1) })
			if errors.Is(err, zk.ErrNoNode) {
				err = driver.ErrNotHeld
			}
		}
		switch {
		case err == nil:
			return nil
		case errors.Is(err, driver.ErrNotHeld):
			if tried {
				return nil
			}
			return err
		case !transient(err):
			return err
		}
		tried = tried || !unsent(err)
		if !patient {
			return err
		}
		if _, err := d.waitSession(ctx); err != nil {
			return err
		}
	}
}

// removeEntry takes our entry out of a reentrant node: it deletes the node
// when no other live entry remains, and otherwise rewrites its entry list,
// in one versioned transaction, so that it never races a request joining.
// Entries whose entry node is gone (their session ended) are dropped on the
// way.
func (l *lease) removeEntry(ctx context.Context) error {
	d := l.d
	for {
		var data []byte
		var stat *zk.Stat
		var children []string
		getErr := d.start(func() (err error) { data, stat, err = d.conn.Get(l.path); return err })
		listErr := d.start(func() (err error) { children, _, err = d.conn.Children(l.dir()); return err })
		err1, err2 := d.await(ctx, getErr), d.await(ctx, listErr)
		if errors.Is(err1, zk.ErrNoNode) {
			return driver.ErrNotHeld
		}
		if err := firstErr(err1, err2); err != nil {
			return err
		}
		n, ok := decodeData(data)
		ids := n.ids
		if !ok || !slices.Contains(ids, l.id) {
			return driver.ErrNotHeld
		}
		entries := parseListing(children).entries
		anchorID := idOf(path.Base(l.path))
		if l.entry != "" && !entries[path.Base(l.entry)] {
			return driver.ErrNotHeld // our entry died with our session, or was deleted
		}
		var live []string
		for _, id := range ids {
			if id != l.id && (id == anchorID || entries[entryName(id, anchorID)]) {
				live = append(live, id)
			}
		}
		var ops []any
		if len(live) == 0 {
			ops = append(ops, &zk.DeleteRequest{Path: l.path, Version: stat.Version})
		} else {
			ops = append(ops, &zk.SetDataRequest{Path: l.path, Data: encodeData(nodeData{owner: n.owner, value: n.value, ids: live}), Version: stat.Version})
		}
		if l.entry != "" {
			ops = append(ops, &zk.DeleteRequest{Path: l.entry, Version: -1})
		}
		err := d.call(ctx, func() error { _, err := d.conn.Multi(ops...); return err })
		switch {
		case err == nil:
			return nil
		case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNoNode):
			continue // changed meanwhile: look again
		}
		return err
	}
}

// await waits for the result of a request started with start, bounded by ctx
// and Close.
func (d *Driver) await(ctx context.Context, done <-chan error) error {
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-d.closing:
		return driver.ErrClosed
	}
}

// firstErr returns the first non-nil error.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// idOf returns the request ID in a queue node's name.
func idOf(name string) string {
	n, _ := parseNode(name)
	return n.id
}
