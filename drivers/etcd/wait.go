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
	"github.com/dlock-go/dlock/internal/backoff"
)

// waiter is one queued request waiting for the entries ahead of it.
type waiter struct {
	d        *Driver
	sess     *keeper
	hold     *keeper // the reentrant hold's lease, or nil
	blockers string  // the range of entries this request waits for
	rev      int64   // the create revision of the request's queue entry
	own      []owned // the request's own keys, which must stay as created

	both context.Context // with hold: ends with either lease
	end  func()
}

// owned is a key of the waiting request, created (and never written since)
// at rev.
type owned struct {
	key string
	rev int64
}

// ours compares each owned key's create and mod revisions with its rev.
func ours(own []owned) []clientv3.Cmp {
	var cmps []clientv3.Cmp
	for _, o := range own {
		cmps = append(cmps,
			clientv3.Compare(clientv3.CreateRevision(o.key), "=", o.rev),
			clientv3.Compare(clientv3.ModRevision(o.key), "=", o.rev))
	}
	return cmps
}

// wait returns once no entry of w.blockers created before w.rev is left,
// with the start of the round trip that established it (or the time the
// deletion was seen, when no read was needed). ahead holds, newest first,
// up to two of those entries as read at revision at.
//
// It watches only the newest entry ahead (no herd), with a watch that
// starts at etcd's current revision, so that etcd streams the entry's
// deletion as it commits. A watch asked to start at an older revision, even
// the revision just read, is parked by etcd in its "unsynced" set whenever
// anything was written meanwhile (under contention, always), and is served
// only by a resync loop that runs every 100 ms: etcd's own Mutex makes that
// mistake. What happened between the read and the watch's start is covered
// by a second read (see watchGone).
//
// When the entry ahead was the oldest one (nothing ahead of it), its
// deletion grants the lock without a read: no entry can be created ahead of
// ours any more. Otherwise a read finds the next entry to wait for.
func (w *waiter) wait(ctx context.Context, started time.Time, ahead []*mvccpb.KeyValue, at int64) (time.Time, error) {
	if len(ahead) == 0 {
		return started, nil
	}
	w.end = func() {}
	w.begin()
	defer w.end()
	// Every call below ends when the wait must stop, not only with the
	// caller's ctx: a read hung on a dead link must not outlive the session.
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(w.stopCtx(), cancel)
	defer stop()
	return w.loop(ctx, callCtx, ahead, at)
}

// loop is wait's body: calls use callCtx, and errors are judged by ctx.
func (w *waiter) loop(ctx, callCtx context.Context, ahead []*mvccpb.KeyValue, at int64) (time.Time, error) {
	retry := newRetry()
	for {
		target := ahead[0]
		oldest := len(ahead) == 1
		gone, seen, err := w.watchGone(ctx, callCtx, target, at, &oldest)
		switch {
		case err != nil:
			return time.Time{}, err
		case gone && oldest:
			if err := w.alive(); err != nil {
				return time.Time{}, err
			}
			return time.Now(), nil
		}
		// Read what is ahead now: the entry we watched is gone (seen: the
		// revision the watch reported it at), or the watch broke (etcd lost
		// its leader, a reconnect).
		for {
			t0 := time.Now()
			ahead, at, err = w.readAt(callCtx, seen, false)
			if err == nil {
				if len(ahead) == 0 {
					return t0, nil
				}
				break
			}
			seen = 0
			if err := w.stopped(ctx, err); err != nil {
				return time.Time{}, err
			}
			if err := retry.Sleep(ctx, w.done()); err != nil {
				return time.Time{}, w.stopped(ctx, err)
			}
		}
	}
}

// unsyncedChecks are the delays, from the start of a watch, of the reads
// that stand in for it while etcd may have parked it (see watchGone). They
// end past two runs of etcd's 100 ms resync loop, which syncs such a watch.
var unsyncedChecks = []time.Duration{
	5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond,
	40 * time.Millisecond, 80 * time.Millisecond, 130 * time.Millisecond, 210 * time.Millisecond,
}

// watchGone watches target until it is deleted (true, with the revision the
// watch reported it at), or until the watch fails or target turns out to be
// gone already or no longer the newest entry ahead (false, to be followed
// by a read). at is the revision of the read that found target.
//
// Once etcd has set the watch up, a read of the current state covers what
// happened before: from then on the watch reports the deletion as it
// commits, unless etcd parked the watch. etcd 3.4 starts a watch at the
// revision after the current one, read just before it registers the
// watch; a write that commits in between (any write, on any key) makes it
// register the watch as "unsynced", to be caught up by its resync loop,
// every 100 ms. The creation reply carries that revision, so when the read
// finds a later one, the watch may be parked, and a few more reads, at
// growing intervals until the resync loop must have run (unsyncedChecks),
// keep a parked watch from stalling the queue. Without a write in between,
// the watch is live and nothing more is read.
func (w *waiter) watchGone(ctx, callCtx context.Context, target *mvccpb.KeyValue, at int64, oldest *bool) (bool, int64, error) {
	// WithRequireLeader: a member cut off from its cluster cancels the watch
	// instead of leaving it silent forever.
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(callCtx))
	defer cancel()
	events := w.d.cli.Watch(wctx, string(target.Key), clientv3.WithCreatedNotify(), clientv3.WithFilterPut())
	var started time.Time // when the watch was set up
	var checks []time.Duration
	check := time.NewTimer(time.Hour)
	check.Stop()
	defer check.Stop()
	// still reads the current state and reports whether target is still the
	// newest entry ahead, and the revision read.
	still := func(min int64) (bool, int64, error) {
		ahead, rev, err := w.readAt(callCtx, min, true)
		if err != nil {
			return false, 0, w.stopped(ctx, err)
		}
		if len(ahead) == 0 || ahead[0].CreateRevision != target.CreateRevision {
			return false, 0, nil
		}
		*oldest = len(ahead) == 1
		return true, rev, nil
	}
	for {
		select {
		case resp, ok := <-events:
			if !ok || resp.Canceled || resp.Err() != nil {
				return false, 0, w.stopped(ctx, nil)
			}
			if resp.Created {
				started = time.Now()
				ok, rev, err := still(resp.Header.Revision)
				if !ok {
					return false, 0, err
				}
				if rev > resp.Header.Revision {
					checks = unsyncedChecks
					check.Reset(checks[0])
				}
			}
			for _, ev := range resp.Events {
				if ev.Type == mvccpb.DELETE {
					return true, resp.Header.Revision, nil
				}
			}
		case <-check.C:
			if ok, _, err := still(at); !ok {
				return false, 0, err
			}
			if checks = checks[1:]; len(checks) > 0 {
				check.Reset(time.Until(started.Add(checks[0])))
			}
		case <-w.done():
			return false, 0, w.stopped(ctx, nil)
		}
	}
}

// readAt returns what read returns, read by the member locally
// (serializable): no round of the Raft leader's read index, which under load
// costs more than the read itself. A state at a revision is the same on
// every member, and entries ahead of ours are never created after ours, so
// "nothing ahead at rev" is as good as "nothing ahead now".
//
// With latest false it reads as of revision rev, which comes from the
// watch, whose member has applied it. With latest true it reads the
// member's latest state, which must be at revision rev or later. When the
// read reaches another member that is behind (or rev was compacted), or our
// own keys are not as created, it falls back to read. rev 0 reads at once.
func (w *waiter) readAt(ctx context.Context, rev int64, latest bool) ([]*mvccpb.KeyValue, int64, error) {
	if rev <= 0 {
		return w.read(ctx)
	}
	at := []clientv3.OpOption{clientv3.WithSerializable()}
	if !latest {
		at = append(at, clientv3.WithRev(rev))
	}
	ops := []clientv3.Op{aheadOp(w.blockers, w.rev, 2, at...)}
	for _, o := range w.own {
		ops = append(ops, clientv3.OpGet(o.key, append(at, clientv3.WithKeysOnly())...))
	}
	resp, err := w.d.cli.Txn(ctx).Then(ops...).Commit()
	switch {
	case errors.Is(err, rpctypes.ErrFutureRev) || errors.Is(err, rpctypes.ErrCompacted):
		return w.read(ctx)
	case err != nil:
		return nil, 0, err
	case latest && resp.Header.Revision < rev:
		return w.read(ctx) // a member behind the watch's
	}
	for i, o := range w.own {
		kvs := resp.Responses[i+1].GetResponseRange().Kvs
		if len(kvs) != 1 || kvs[0].CreateRevision != o.rev || kvs[0].ModRevision != o.rev {
			return w.read(ctx) // decides, and says why
		}
	}
	if latest {
		rev = resp.Header.Revision
	}
	return resp.Responses[0].GetResponseRange().Kvs, rev, nil
}

// read returns, newest first, up to two entries still ahead of ours, and
// the revision it read at, in one transaction that first checks our own
// entry: when it is gone, waiting would be waiting for nothing.
func (w *waiter) read(ctx context.Context) ([]*mvccpb.KeyValue, int64, error) {
	resp, err := w.d.cli.Txn(ctx).If(ours(w.own)...).Then(aheadOp(w.blockers, w.rev, 2)).Commit()
	if err != nil {
		return nil, 0, err
	}
	if !resp.Succeeded {
		// Our entry is gone. Most likely with our lease (expired, revoked),
		// which a keepalive sent now tells; otherwise someone deleted it.
		_ = w.sess.confirm(ctx, time.Now())
		if w.hold != nil {
			_ = w.hold.confirm(ctx, time.Now())
		}
		if err := w.alive(); err != nil {
			return nil, 0, err
		}
		return nil, 0, errEntryGone
	}
	return resp.Responses[0].GetResponseRange().Kvs, resp.Header.Revision, nil
}

// alive returns the reason when the etcd leases the entry lives under are
// lost.
func (w *waiter) alive() error {
	if err := w.sess.lost(); err != nil {
		return fmt.Errorf("etcd: waiting for the lock: %w", err)
	}
	if w.hold != nil {
		if err := w.hold.lost(); err != nil {
			return fmt.Errorf("etcd: waiting for the lock: %w", err)
		}
	}
	return nil
}

// done returns a channel closed when waiting must stop for a reason other
// than ctx: the session lease (or the hold's) lost, or the Driver closed.
func (w *waiter) done() <-chan struct{} { return w.stopCtx().Done() }

// stopCtx is the context that done watches.
func (w *waiter) stopCtx() context.Context {
	if w.hold == nil {
		return w.sess.ctx
	}
	return w.both
}

// begin prepares w for waiting; end must be called when it is done.
func (w *waiter) begin() {
	if w.hold == nil {
		return
	}
	// Two unrelated contexts: the session's is the parent, the hold's
	// cancels it through a callback, which costs no goroutine while idle.
	var cancel context.CancelFunc
	w.both, cancel = context.WithCancel(w.sess.ctx)
	stop := context.AfterFunc(w.hold.ctx, cancel)
	w.end = func() {
		stop()
		cancel()
	}
}

// stopped returns the error that ends the wait, or nil when err (nil, or a
// failed read or watch) is worth retrying: ctx's error when it ended,
// ErrClosed after Close, the loss of the session, or errEntryGone.
func (w *waiter) stopped(ctx context.Context, err error) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	if w.d.closing() {
		return driver.ErrClosed
	}
	if lost := w.alive(); lost != nil {
		return lost
	}
	if err == errEntryGone {
		return err
	}
	return nil
}

// newRetry is the backoff, from 10 ms to 1 s, of reads and watches that
// failed while waiting (a reconnect, a leader election).
func newRetry() *backoff.Jittered {
	return &backoff.Jittered{First: 10 * time.Millisecond, Limit: time.Second}
}
