package redis

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/driveropt"
	"github.com/dlock-go/dlock/internal/leasekit"
)

// RedLock is a dlock driver over N independent Redis masters (the RedLock
// algorithm): a lock is held when a majority of them, N/2+1, hold it, each
// with the same scripts, key layout and capabilities as [Driver] but
// Transfer (see [RedLock.Capabilities]). Make it
// with [NewRedLock] over go-redis clients, or through dlock.Open with a
// "redlock://" URL; see "RedLock" in the package documentation for what it
// promises, and for its waiters' queue, kept on every master in an order
// the masters agree on (redlock_queue.go). It is safe for concurrent use.
type RedLock struct {
	nodes   []*rlNode
	quorum  int
	owned   bool // the clients were made from a URL, so Close closes them
	prefix  string
	timeout time.Duration // per-master timeout; 0: nodeTimeout(ttl)
	closed  atomic.Bool

	subMu       sync.Mutex     // orders Subscribe's Go calls before Close's Wait
	subscribing sync.WaitGroup // background subscriptions and queue exits, which Close waits for

	self  string        // the Driver's name in the waiters' queues, and in the releases' messages
	done  chan struct{} // closed by Close
	queue rlQueue       // the queues it waits in (redlock_queue.go)
}

// rlNode is one master.
type rlNode struct {
	client goredis.UniversalClient
	name   string // its address, for errors
	notify *notifier
}

var _ driver.Driver = (*RedLock)(nil)

// NewRedLock returns a RedLock driver over one client per master, which the
// caller keeps owning: Close does not close them. Each client must reach a
// different, independent server (not a replica of another, nor the same
// server under another name); clients whose addresses name the same server
// (the same host and port, "localhost" and 127.0.0.1 counting as the same
// host) are refused, as they would inflate the quorum. dlock.Open also
// compares the servers' run IDs, which NewRedLock, making no I/O, cannot.
//
// Set ContextTimeoutEnabled on each client: the per-master timeout (see
// [WithNodeTimeout]) cuts a hung master's command only then; without it a
// hung master holds every operation for the client's read timeout.
func NewRedLock(clients []goredis.UniversalClient, opts ...Option) (*RedLock, error) {
	if len(clients) == 0 {
		return nil, errors.New("redis: NewRedLock with no clients")
	}
	o := defaultOptions()
	if err := driveropt.Apply(&o, opts); err != nil {
		return nil, err
	}
	addrs := make([]string, len(clients))
	for i, c := range clients {
		if c == nil {
			return nil, fmt.Errorf("redis: NewRedLock: client %d is nil", i)
		}
		for j := range i {
			if clients[j] == c {
				return nil, fmt.Errorf("redis: NewRedLock: clients %d and %d are the same client", j, i)
			}
		}
		addrs[i] = clientAddr(c)
	}
	if err := distinctAddrs(addrs, nil); err != nil {
		return nil, fmt.Errorf("redis: NewRedLock: %w", err)
	}
	return newRedLock(clients, addrs, false, o), nil
}

func newRedLock(clients []goredis.UniversalClient, addrs []string, owned bool, o options) *RedLock {
	r := &RedLock{quorum: len(clients)/2 + 1, owned: owned, prefix: o.prefix, timeout: o.nodeTimeout, self: rand.Text(), done: make(chan struct{})}
	r.queue.masters, r.queue.waits, r.queue.subs = len(clients), map[string]*rlWait{}, map[string]int{}
	for i, c := range clients {
		name := addrs[i]
		if name == "" {
			name = fmt.Sprintf("master %d", i)
		}
		r.nodes = append(r.nodes, &rlNode{client: c, name: name, notify: newNotifier(c, r.self)})
	}
	return r
}

// clientAddr returns the address a single-node client dials, or "".
func clientAddr(c goredis.UniversalClient) string {
	if sc, ok := c.(*goredis.Client); ok {
		return sc.Options().Addr
	}
	return ""
}

// Capabilities reports read-write and reentrant locks, each held on a
// majority, release notifications from every master (Subscribe), batched
// renewal (ExtendBatch), inspection (Inspect) with the holder's value
// (Values; see "RedLock" in the package documentation for when a holder is
// reported) and blocks of 16 fencing tokens, as [Driver.Capabilities]
// does; there is no Transfer, and no AcquireAny (AnyAcquirer): each master
// would pick its own first free lock among the requests, so the masters
// could grant different permits and no majority agree on one, and the core
// tries a semaphore's permits one request at a time instead. Every
// master that grants reserves a block, and the second phase of an
// acquisition moves a majority's counters past the block of the token
// chosen, so that any later majority includes a master whose next token is
// beyond it. Keys and TTLs are those the core accepts, as for [Driver]: a
// TTL too short for the masters' round trips is refused later, by every
// acquisition finding its validity used up.
func (r *RedLock) Capabilities() driver.Capabilities {
	return driver.Capabilities{
		Shared:        true,
		Reentrant:     true,
		TokenBlock:    tokenBlock,
		Notifier:      r,
		BatchExtender: r,
		Inspector:     r,
		Values:        true,
	}
}

// Masters returns the number of masters, and Quorum the majority a lock
// needs.
func (r *RedLock) Masters() int { return len(r.nodes) }

// Quorum returns the number of masters that must hold a lock: N/2+1.
func (r *RedLock) Quorum() int { return r.quorum }

// nodeTimeout is how long one master may take to answer one request of an
// operation with ttl: set by WithNodeTimeout, else a tenth of the TTL,
// between 2 ms and 100 ms. It must be far below the TTL, so that a hung
// master costs a small part of the validity.
func (r *RedLock) nodeTimeout(ttl time.Duration) time.Duration {
	if r.timeout > 0 {
		return r.timeout
	}
	return min(max(ttl/10, 2*time.Millisecond), 100*time.Millisecond)
}

// drift is the clock drift RedLock allows for over ttl, as the Redis
// documentation suggests: 1% of the TTL plus 2 ms.
func drift(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }

// stillValid reports whether something confirmed by every master since
// started is still valid for ttl, with the drift allowance left over.
func stillValid(started time.Time, ttl time.Duration) bool {
	return time.Since(started)+drift(ttl) < ttl
}

// each runs f on the masters for which want is true (every master when want
// is nil) at once, each with its own ctx bounded by timeout, and waits for
// all of them.
func (r *RedLock) each(ctx context.Context, timeout time.Duration, want []bool, f func(ctx context.Context, i int, nd *rlNode)) {
	var wg sync.WaitGroup
	for i, nd := range r.nodes {
		if want != nil && !want[i] {
			continue
		}
		wg.Go(func() {
			nctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			f(nctx, i, nd)
		})
	}
	wg.Wait()
}

// Acquire tries once to take the lock on a majority of the masters, in two
// phases.
//
// First the acquire script runs on every master at once, each bounded by the
// per-master timeout. Without a majority of grants, or when the time taken
// leaves no validity (TTL − elapsed − drift ≤ 0), the request is released on
// every master that granted it or did not answer (one that timed out may
// have applied it) and refused:
// with a *driver.LockedError when masters refused it because another owner
// holds the lock there, and otherwise with an error saying which masters
// failed or how long they took (a TTL too short for the masters should
// fail loudly, not wait forever).
//
// Then the fencing token T, the highest token the majority issued, is
// written back to as many of the masters that granted as a majority needs
// beside those that issued T (the fence script raises their counters to
// the end of T's block, and settles the hold), one at least: see "RedLock"
// in the package documentation for why. The grant stands when a majority's
// counters are past T's block, with at least one master's acknowledgement,
// within the validity. A
// re-entry (a majority joined an entry of the same owner) keeps the token
// of the entry it joined.
//
// The lease's Validity is the TTL, counted by the core from the start of
// this call: the time the masters took is thereby subtracted, and the core
// subtracts the drift allowance too.
func (r *RedLock) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	if err := r.enter(ctx); err != nil {
		return nil, err
	}
	n := namesOf(r.prefix, req.Key)
	timeout := r.nodeTimeout(req.TTL)
	waiter, ticket := r.waiterFor(n, req)
	var wakes []uint64
	if waiter != "" {
		var quiet time.Duration
		if wakes, quiet = r.queue.start(n); quiet > 0 {
			return nil, &driver.LockedError{RetryAfter: quiet} // see rlQueue.start
		}
	}
	started := time.Now()
	grants := make([]grant, len(r.nodes))
	errs := make([]error, len(r.nodes))
	r.each(ctx, timeout, nil, func(ctx context.Context, i int, nd *rlNode) {
		grants[i], errs[i] = rlAcquire(ctx, nd.client, n, req, waiter, ticket)
	})
	granted, refusers := make([]bool, len(r.nodes)), make([]bool, len(r.nodes))
	ok, again, refused := 0, 0, 0
	var token, againToken uint64
	var retry time.Duration
	for i, g := range grants {
		switch {
		case errs[i] != nil:
			errs[i] = fmt.Errorf("%s: %w", r.nodes[i].name, errs[i])
		case g.ok:
			granted[i] = true
			ok++
			token = max(token, g.token)
			if g.again {
				again++
				againToken = max(againToken, g.token)
			}
		default:
			refused++
			refusers[i] = true
			if g.retry > 0 && (retry == 0 || g.retry < retry) {
				retry = g.retry
			}
		}
	}
	if again >= r.quorum {
		token = againToken
	}
	fenced, fenceTried := 0, false
	if ok >= r.quorum && stillValid(started, req.TTL) {
		fenceTried = true
		if fenced = r.secondPhase(ctx, timeout, started, n, req, token, grants, granted, errs); fenced >= r.quorum && stillValid(started, req.TTL) {
			if waiter != "" {
				r.granted(ctx, n, granted)
			}
			l := &rlLease{r: r, names: n, id: req.ID}
			l.Start(token, req.TTL)
			return l, nil
		}
	}
	// No valid majority: give back whatever was granted, and whatever a
	// master that failed to answer may have applied. A master that
	// refused holds nothing of this request (the script runs atomically,
	// and grants again a request it already holds, so a refusal even after
	// a resend means no hold): releasing there would be a wasted request
	// for every refused waiter, several per critical section under
	// contention.
	if applied := mayHold(granted, errs); applied != nil {
		if ctx.Err() != nil {
			waiter = "" // the waiter gave up: it does not keep its place
		}
		cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), req.TTL)
		r.releaseAll(cleanup, n, req.ID, r.releaseTimeout(req.TTL), applied, func(ctx context.Context, c goredis.Scripter) (bool, error) {
			return rlRelease(ctx, c, n, req.ID, waiter, queueLife(req.TTL), ticket)
		})
		cancel()
	}
	elapsed := time.Since(started).Round(time.Millisecond)
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	switch {
	case r.closed.Load():
		return nil, driver.ErrClosed
	case refused > 0 && ok < r.quorum:
		// Held by someone else on enough masters: worth waiting for.
		if waiter != "" && refused > len(r.nodes)-r.quorum {
			r.queue.refused(n, wakes, refusers, r.quorum, retry)
		}
		return nil, &driver.LockedError{RetryAfter: retry}
	case ok >= r.quorum && (!fenceTried || fenced >= r.quorum):
		return nil, fmt.Errorf("redis: redlock: a majority granted the lock, but only after %v of its %v TTL (less the %v drift allowance): the TTL is too short for these masters, or they are overloaded", elapsed, req.TTL, drift(req.TTL))
	case ok >= r.quorum:
		return nil, fmt.Errorf("redis: redlock: a majority granted the lock, but its fencing token reached %d of %d in time, %d needed: %w",
			fenced, ok, r.quorum, errors.Join(errs...))
	}
	return nil, fmt.Errorf("redis: redlock: %d of %d masters granted the lock within the %v per-master timeout, %d needed: %w",
		ok, len(r.nodes), timeout, r.quorum, errors.Join(errs...))
}

// secondPhase writes the fencing token back (see Acquire) and returns how
// many masters' counters are now past token's block: those that granted
// with token or more already (their own grant reserved the block, or a
// fence before it), and those that acknowledged the fence. It writes only
// to as many granting masters as a majority still needs, and to one at
// least, so that some master settles the hold with the lease's token (see
// [RedLock.Inspect]); when some of those fail to acknowledge it, it writes
// to the other granting masters in a second round, while the grant, which
// started at started, is still valid. A fence failure is recorded in errs.
//
// Under contention nearly every master grants, with tokens of its own:
// writing back only what a majority needs, rather than to every granting
// master, is 2 requests per acquisition on 5 masters instead of 5.
func (r *RedLock) secondPhase(ctx context.Context, timeout time.Duration, started time.Time, n names, req driver.Request, token uint64, grants []grant, granted []bool, errs []error) int {
	first, rest, covered := fenceTargets(grants, granted, token, r.quorum)
	acked := 0
	for round, want := range [][]bool{first, rest} {
		if want == nil || (covered >= r.quorum && acked > 0) || (round > 0 && !stillValid(started, req.TTL)) {
			break
		}
		var mu sync.Mutex
		r.each(ctx, timeout, want, func(ctx context.Context, i int, nd *rlNode) {
			err := fence(ctx, nd.client, n, req.ID, token, blockFor(req))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs[i] = fmt.Errorf("%s: writing the fencing token back: %w", nd.name, err)
				return
			}
			acked++
			if grants[i].token < token {
				covered++ // its counter now past the block too
			}
		})
	}
	if acked == 0 {
		return 0 // no master settled the hold: not a grant (see Inspect)
	}
	return covered
}

// fenceTargets chooses where the second phase writes token back, among the
// masters that granted: first, the fewest that make a majority of counters
// past token's block with the covered ones (those that granted with token
// or more), and one at least; rest, the other granting masters, for a
// second round when some of first do not acknowledge (nil when none).
func fenceTargets(grants []grant, granted []bool, token uint64, quorum int) (first, rest []bool, covered int) {
	first, rest = make([]bool, len(grants)), make([]bool, len(grants))
	for i, g := range grants {
		if granted[i] && g.token >= token {
			covered++
		}
	}
	need := max(quorum-covered, 1)
	// Masters below token first: each one written to adds to the majority.
	for _, below := range []bool{true, false} {
		for i, g := range grants {
			if granted[i] && (g.token < token) == below {
				if need > 0 {
					first[i] = true
					need--
				} else {
					rest[i] = true
				}
			}
		}
	}
	if !slices.Contains(rest, true) {
		rest = nil
	}
	return first, rest, covered
}

// mayHold returns which masters may hold a failed acquisition: those that
// granted it and those whose reply was lost; nil when none may.
func mayHold(granted []bool, errs []error) []bool {
	var want []bool
	for i := range granted {
		if granted[i] || errs[i] != nil {
			if want == nil {
				want = make([]bool, len(granted))
			}
			want[i] = true
		}
	}
	return want
}

// releaseAll runs rel (the release script for id when nil) on the masters
// for which want is true (every master when want is nil), each bounded by
// timeout.
func (r *RedLock) releaseAll(ctx context.Context, n names, id string, timeout time.Duration, want []bool, rel func(context.Context, goredis.Scripter) (bool, error)) (released, refused int, errs []error) {
	if rel == nil {
		rel = func(ctx context.Context, c goredis.Scripter) (bool, error) { return release(ctx, c, n, id, "PUBLISH") }
	}
	var mu sync.Mutex
	r.each(ctx, timeout, want, func(ctx context.Context, i int, nd *rlNode) {
		ok, err := rel(ctx, nd.client)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", nd.name, err))
		case ok:
			released++
		default:
			refused++
		}
	})
	return released, refused, errs
}

// releaseTimeout bounds one master's release: twice an acquisition's
// per-master timeout, as a release is never retried, and a master that
// misses it keeps the hold for a TTL.
func (r *RedLock) releaseTimeout(ttl time.Duration) time.Duration { return 2 * r.nodeTimeout(ttl) }

// verdict turns the per-master outcomes of an extension or release into the
// lease's: nil with a majority, ErrNotHeld when enough masters said "not
// yours" that no majority is possible, the masters' errors otherwise.
func (r *RedLock) verdict(ok, refused int, errs []error) error {
	switch {
	case ok >= r.quorum:
		return nil
	case refused > len(r.nodes)-r.quorum:
		return driver.ErrNotHeld
	case r.closed.Load():
		return driver.ErrClosed
	}
	return fmt.Errorf("redis: redlock: %d of %d masters confirmed, %d needed: %w", ok, len(r.nodes), r.quorum, errors.Join(errs...))
}

// Subscribe listens for releases of key on every master's shared pub/sub
// connection (each as [Driver.Subscribe] does), and merges their wake-ups:
// a release publishes on each master it frees. It returns at once: each
// master is subscribed in the background, bounded by a short timeout, so
// that a hung master does not delay the waiter's first attempt; each
// subscription that takes effect wakes the waiter once (see [Driver]), so a
// release in between is not missed. A master that cannot be subscribed
// sends no wake-ups; the core polls beside them.
func (r *RedLock) Subscribe(ctx context.Context, key string) (driver.Subscription, error) {
	if err := r.enter(ctx); err != nil {
		return nil, err
	}
	channel := namesOf(r.prefix, key).channel()
	m := &multiSub{c: make(chan struct{}, 1), done: make(chan struct{}), r: r, names: namesOf(r.prefix, key)}
	r.subMu.Lock()
	defer r.subMu.Unlock()
	if r.closed.Load() {
		return nil, driver.ErrClosed
	}
	r.queue.subscribed(m.names, 1)
	for i, nd := range r.nodes {
		in := make(chan struct{}, 1)
		r.subscribing.Go(func() { m.forward(i, in) })
		r.subscribing.Go(func() {
			sctx, cancel := context.WithTimeout(context.Background(), subscribeTimeout)
			defer cancel()
			s, err := nd.notify.subscribeWith(sctx, channel, personalChannel(channel, r.self), in)
			if err != nil {
				return
			}
			m.mu.Lock()
			defer m.mu.Unlock()
			if m.closed {
				_ = s.Close()
				return
			}
			m.subs = append(m.subs, s)
		})
	}
	return m, nil
}

// subscribeTimeout bounds subscribing on one master: a write on the shared
// connection, or its dial when there is none yet.
const subscribeTimeout = time.Second

// multiSub is one waiter's subscriptions on several masters, delivering to
// one channel.
type multiSub struct {
	c      chan struct{}
	mu     sync.Mutex
	closed bool
	subs   []*subscription
	r      *RedLock
	names  names
	done   chan struct{} // closed by Close
}

// forward passes master i's wake-ups, delivered to in, on to the waiter,
// counting them by master for the Driver's queue (rlQueue.woke), until the
// subscription or the Driver closes.
func (m *multiSub) forward(i int, in chan struct{}) {
	for {
		select {
		case <-in:
			m.r.queue.woke(m.names, i)
			select {
			case m.c <- struct{}{}:
			default: // a wake-up is pending already
			}
		case <-m.done:
			return
		case <-m.r.done:
			return
		}
	}
}

func (m *multiSub) C() <-chan struct{} { return m.c }

func (m *multiSub) Close() error {
	m.mu.Lock()
	subs, was := m.subs, m.closed
	m.subs, m.closed = nil, true
	if !was {
		close(m.done)
	}
	m.mu.Unlock()
	for _, s := range subs {
		_ = s.Close()
	}
	if !was {
		m.r.unsubscribed(m.names)
	}
	return nil
}

// Close ends the masters' pub/sub connections, and closes the go-redis
// clients if the driver made them from a URL. Locks still held are not
// released: they expire by their TTL. Later calls return driver.ErrClosed;
// a second Close returns nil.
func (r *RedLock) Close() error {
	if !r.closed.CompareAndSwap(false, true) {
		return nil
	}
	var errs []error
	r.subMu.Lock() // no Subscribe starts a subscription after this
	r.subMu.Unlock()
	close(r.done)        // ends the subscriptions' forwarding
	r.subscribing.Wait() // each ends within subscribeTimeout
	for _, nd := range r.nodes {
		nd.notify.close()
		if r.owned {
			errs = append(errs, nd.client.Close())
		}
	}
	return errors.Join(errs...)
}

func (r *RedLock) enter(ctx context.Context) error {
	if r.closed.Load() {
		return driver.ErrClosed
	}
	return ctx.Err()
}

// opErr is [Driver.opErr] for a RedLock: ErrClosed after Close, and a
// "not now" reply from a master (markNotNow) marks the whole error
// transient, since a majority may answer once that master is back.
func (r *RedLock) opErr(err error) error {
	if r.closed.Load() {
		return driver.ErrClosed
	}
	return markNotNow(err)
}

// rlLease is a lock held on a majority of the masters. As on a single
// server, the masters do not tell a holder of its loss: the next Extend
// finds it.
type rlLease struct {
	driver.NoReports
	// Grant holds the fencing token (see "RedLock" in the package
	// documentation for its guarantee), and the TTL of the latest grant or
	// extension as its validity, counted from the start of its call.
	leasekit.Grant
	r     *RedLock
	names names
	id    string
}

var _ driver.Lease = (*rlLease)(nil)

// Extend extends the hold on every master at once; it succeeds when a
// majority extended it within the validity. When so many masters no longer
// hold it that no majority can, it returns ErrNotHeld; other failures are
// returned as they are, for the core to retry.
func (l *rlLease) Extend(ctx context.Context, ttl time.Duration) error {
	if err := l.r.enter(ctx); err != nil {
		return err
	}
	started := time.Now()
	var mu sync.Mutex
	ok, refused := 0, 0
	var errs []error
	l.r.each(ctx, l.r.nodeTimeout(ttl), nil, func(ctx context.Context, i int, nd *rlNode) {
		extended, err := extend(ctx, nd.client, l.names, l.id, ttl)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", nd.name, err))
		case extended:
			ok++
		default:
			refused++
		}
	})
	if err := l.r.verdict(ok, refused, errs); err != nil {
		return err
	}
	if !stillValid(started, ttl) {
		return fmt.Errorf("redis: redlock: a majority extended the lock, but only after %v of its %v TTL", time.Since(started).Round(time.Millisecond), ttl)
	}
	l.SetValidity(ttl)
	return nil
}

// Release removes the hold from every master at once, and wakes the key's
// waiters through each master it frees. It succeeds when a majority still
// held it; when no majority can have, it returns ErrNotHeld (after removing
// what was left on the minority).
func (l *rlLease) Release(ctx context.Context) error {
	if err := l.r.enter(ctx); err != nil {
		return err
	}
	released, refused, errs := l.r.releaseAll(ctx, l.names, l.id, l.r.releaseTimeout(l.Validity()), nil, nil)
	return l.r.verdict(released, refused, errs)
}
