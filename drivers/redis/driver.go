package redis

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/driveropt"
)

// Driver is a dlock driver over one Redis server or a Redis Cluster: see
// [Driver.Capabilities] for what it offers. Make it with [New] over a
// go-redis client, or through dlock.Open with a "redis://", "rediss://",
// "redis+sentinel://", "rediss+sentinel://", "redis+cluster://" or
// "rediss+cluster://" URL. It is safe for concurrent use.
type Driver struct {
	client goredis.UniversalClient
	owned  bool // the client was made from a URL, so Close closes it
	prefix string
	// publish is the command the release script publishes with: PUBLISH,
	// or SPUBLISH on a Cluster, where a PUBLISH would reach every node.
	publish string
	closed  atomic.Bool
	notify  *notifier
	// self names this Driver in the waiters' queues (see scripts.go), and
	// queued holds the locks (by name) whose queue it may be in: those it
	// was refused as a waiter and has not been granted since, so that only
	// a waiter that gives up pays a request to leave the queue.
	self     string
	queuedMu sync.Mutex
	queued   map[string]struct{}
	// acks, when its n is not 0, makes grants and renewals wait for
	// replicas (WithReplicaAcks).
	acks replicaAcks
	// grants keeps the grants releases make to this Driver's queued
	// attempts, until a waiter claims them (grants.go).
	grants *grants
}

var _ driver.Driver = (*Driver)(nil)

// New returns a Driver over client, which the caller keeps owning: Close
// does not close it. Each Driver is an independent lock client, even when
// several share one go-redis client.
//
// client is a single-node client (*goredis.Client, or a failover client
// from Sentinel), or a *goredis.ClusterClient: on a Cluster the driver
// publishes and subscribes with sharded pub/sub (SPUBLISH, SSUBSCRIBE;
// Redis 7.0 or later), and go-redis follows MOVED and ASK redirections.
// Setting ContextTimeoutEnabled on it lets the contexts of dlock's calls
// bound the commands they send, as the clients dlock.Open makes do.
func New(client goredis.UniversalClient, opts ...Option) (*Driver, error) {
	if client == nil {
		return nil, errors.New("redis: New with a nil client")
	}
	o := defaultOptions()
	if err := driveropt.Apply(&o, opts); err != nil {
		return nil, err
	}
	if _, ok := client.(*goredis.ClusterClient); ok && o.acks.n != 0 {
		return nil, fmt.Errorf("%w: redis replica acknowledgements on a Cluster: WAIT counts the replicas of one node", dlock.ErrInvalidOption)
	}
	return newDriver(client, false, o), nil
}

func newDriver(client goredis.UniversalClient, owned bool, o options) *Driver {
	publish := "PUBLISH"
	if _, ok := client.(*goredis.ClusterClient); ok {
		publish = "SPUBLISH" // to the lock's shard only
	}
	self := rand.Text()
	d := &Driver{
		client:  client,
		owned:   owned,
		prefix:  o.prefix,
		publish: publish,
		notify:  newNotifier(client, self),
		self:    self,
		queued:  map[string]struct{}{},
		acks:    o.acks,
	}
	d.grants = newGrants(d)
	d.notify.grant = d.grants.onMessage
	return d
}

// Capabilities reports read-write and reentrant locks, release
// notifications (Subscribe), batched renewal (ExtendBatch), direct handoff
// (Transfer) with blocks of 16 fencing tokens, inspection (Inspect) that
// reports the value stored with the hold (Values), and the first free lock
// among several in one script (AcquireAny; one per run of keys in one slot
// on a Cluster): see
// "Capabilities" in the package documentation. It sets no key or TTL rule
// of its own: Redis names are binary safe, the driver's escaping keeps any
// key's names distinct, and TTLs are rounded up to whole milliseconds, so
// the lock is never held for less than asked.
func (d *Driver) Capabilities() driver.Capabilities {
	return driver.Capabilities{
		Shared:        true,
		Reentrant:     true,
		TokenBlock:    tokenBlock,
		Notifier:      d,
		BatchExtender: d,
		Transferer:    d,
		Inspector:     d,
		Values:        true,
		AnyAcquirer:   d,
	}
}

// Acquire tries once to take the lock req.Key for req.ID with one script:
// in req.Mode, entering it again when req.Owner already holds it in that
// mode, and with a new fencing token for every new grant (the driver is not
// Blocking: the core waits, woken by Subscribe). When another owner holds
// the lock it returns a *driver.LockedError with the time the holder's
// lease still runs.
//
// A plain waiting request (Wait, exclusive, no owner, no value) is first
// answered from the Driver's mailbox when a release granted the lock to
// one of the Driver's queued attempts and said so in its message: the
// lease is then that grant's, under the attempt's request ID, and costs no
// request (grants.go).
//
// When the script's outcome is unknown (ctx ended or the connection failed
// after it was sent), it may have been applied: the hold is then released by
// req.ID, with a context that outlives ctx but not the TTL, before the error
// is returned, so that nothing is left behind. A lease is made only from the
// script's own reply or from a grant by release: see "Guarantees" in the
// package documentation.
func (d *Driver) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	if err := d.enter(ctx); err != nil {
		return nil, err
	}
	start := time.Now()
	n := namesOf(d.prefix, req.Key)
	waiter := ""
	if req.Wait && req.Mode == driver.Exclusive && req.Owner == "" {
		waiter = d.self // queue for the lock: see scripts.go
	}
	// A plain waiting attempt may be granted by a release, and the lock
	// then taken from the release's message (grants.go); not with a value
	// (the release stores none) nor with replica acknowledgements (the
	// releaser's grant would not be waited for).
	byRelease := waiter != "" && req.Value == "" && d.acks.n == 0 && !strings.ContainsAny(req.ID, " \t")
	if byRelease {
		if m, validity, ok := d.grants.claim(n, req.TTL, start); ok {
			d.markQueued(n, false) // the grant took the Driver out of the queue
			l := &lease{d: d, names: n, id: m.id}
			l.Start(m.token, validity)
			return l, nil
		}
	}
	var extra []any // acquire.lua's ARGV[11..13]
	var seq uint64
	var takeover string
	switch {
	case byRelease:
		seq, takeover = d.grants.begin(n, req.ID, req.TTL)
		extra = []any{"", fmt.Sprintf("%s %d %d", millis(req.TTL), blockFor(req), seq), takeover}
	case waiter != "":
		extra = []any{"", ""} // no grant by release: drop an earlier attempt's
	}
	c, acked := d.ackedFor(req.TTL)
	g, err := runAcquire(ctx, acquireScript, c, n, req, waiter, blockFor(req), false, extra...)
	if err == nil && g.ok {
		err = acked.shortfall() // a grant a failover could lose is no grant
	}
	if byRelease {
		d.grants.finish(n, seq, err == nil && !g.ok, err == nil && g.ok)
	}
	if err != nil {
		if (mayHaveApplied(err) || errors.Is(err, ErrNotReplicated)) && !d.closed.Load() {
			cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), req.TTL)
			_, _ = release(cleanup, d.client, n, req.ID, d.publish)
			if takeover != "" {
				// The attempt may not have taken it over: nobody claims it.
				_, _ = release(cleanup, d.client, n, takeover, d.publish)
			}
			cancel()
			if waiter != "" {
				// A refusal may have queued the Driver: its last waiter
				// to give up must then leave the queue.
				d.markQueued(n, true)
			}
		}
		return nil, d.callErr(ctx, err)
	}
	if waiter != "" {
		d.markQueued(n, !g.ok)
	}
	if !g.ok {
		// A waiting Driver was queued, and is woken by the release that
		// makes it the head: it need not poll before its entry's renewal
		// is due, which g.retry then says.
		return nil, &driver.LockedError{RetryAfter: g.retry, Queued: waiter != ""}
	}
	l := &lease{d: d, names: n, id: req.ID}
	l.Start(g.token, req.TTL)
	return l, nil
}

// Subscribe starts listening for releases of key on the Driver's shared
// pub/sub connection. See "Capabilities" in the package documentation.
func (d *Driver) Subscribe(ctx context.Context, key string) (driver.Subscription, error) {
	if err := d.enter(ctx); err != nil {
		return nil, err
	}
	n := namesOf(d.prefix, key)
	s, err := d.notify.subscribe(ctx, n.channel())
	if err != nil {
		return nil, d.opErr(err)
	}
	return &queuedSubscription{subscription: s, d: d, names: n}, nil
}

// queuedSubscription leaves the waiters' queue when the Driver's last
// waiter for the lock stops waiting, so that a waiter that gave up does not
// hold up the others until its entry lapses.
type queuedSubscription struct {
	*subscription
	d      *Driver
	names  names
	closed atomic.Bool
}

func (s *queuedSubscription) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	err := s.subscription.Close()
	if s.d.closed.Load() || s.d.notify.watching(s.names.channel()) {
		return err
	}
	// No waiter of this Driver will claim a grant a release made it: one
	// that came is given back now, one on its way when it comes.
	s.d.grants.abandon(s.names)
	if !s.d.markQueued(s.names, false) {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	_ = leaveScript.Run(ctx, s.d.client, []string{s.names.waiters()}, s.d.self).Err() // a failure lapses
	return err
}

// markQueued records whether the Driver may be in the waiters' queue of
// the lock n, and reports whether it may have been before.
func (d *Driver) markQueued(n names, queued bool) bool {
	d.queuedMu.Lock()
	defer d.queuedMu.Unlock()
	_, was := d.queued[n.lock]
	if queued {
		d.queued[n.lock] = struct{}{}
	} else {
		delete(d.queued, n.lock)
	}
	return was
}

// queueLife is how long a waiting Driver's queue entry lasts without a new
// attempt: the lock's TTL, at most maxQueueLife. The Driver comes back
// within a third of it (the refusal says so), and a crashed Driver's entry
// holds the queue up for no longer.
func queueLife(ttl time.Duration) time.Duration { return min(ttl, maxQueueLife) }

const maxQueueLife = 2 * time.Second

// Close ends the Driver's pub/sub connection, and closes the go-redis client
// if the Driver made it from a URL (never one passed to [New]). Locks still
// held are not released: they expire by their TTL. Later calls return
// driver.ErrClosed; a second Close returns nil.
func (d *Driver) Close() error {
	if !d.closed.CompareAndSwap(false, true) {
		return nil
	}
	d.notify.close()
	d.grants.close() // the releases of unclaimed grants under way, bounded
	if d.owned {
		return d.client.Close()
	}
	return nil
}

// enter checks that the Driver is open and ctx alive, before any I/O.
func (d *Driver) enter(ctx context.Context) error {
	if d.closed.Load() {
		return driver.ErrClosed
	}
	return ctx.Err()
}

// ctxErr returns ctx's error, waiting for it when ctx's deadline has
// passed but its timer has not fired yet: go-redis sets the connection's
// deadline from ctx's, so a command can fail with an i/o timeout a moment
// before ctx ends, and that failure is the context's, not the server's.
func ctxErr(ctx context.Context) error {
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		<-ctx.Done()
	}
	return ctx.Err()
}

// callErr is the error of a call whose command failed with err: ctx's when
// ctx ended (see ctxErr), opErr's otherwise.
func (d *Driver) callErr(ctx context.Context, err error) error {
	if cerr := ctxErr(ctx); cerr != nil {
		return cerr
	}
	return d.opErr(err)
}

// opErr turns the error of a command into what the core expects: ErrClosed
// when Close ran meanwhile (go-redis then says its client or pool is closed),
// the error marked transient when the server said "not now" (markNotNow),
// the error unchanged otherwise, for the core to wrap once.
func (d *Driver) opErr(err error) error {
	if d.closed.Load() {
		return driver.ErrClosed
	}
	return markNotNow(err)
}

// mayHaveApplied reports whether a command that failed with err may still
// have run on the server. Only failures known to come before the command was
// sent, or replies from the server itself, say it did not.
func mayHaveApplied(err error) bool {
	var replyErr goredis.Error
	var opErr *net.OpError
	switch {
	case errors.Is(err, goredis.ErrClosed), errors.Is(err, goredis.ErrPoolTimeout):
		return false // never sent
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return false // no connection, so nothing was sent
	case errors.As(err, &replyErr) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded):
		// The server answered: our scripts raise errors before their first
		// write, and nothing else fails midway on a single server.
		return false
	}
	return true
}
