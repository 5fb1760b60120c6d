package redis

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/driver"
)

// The waiters' queue of a RedLock: the single-server queue (see
// lua/prelude.lua) kept on every master, ordered by a ticket each waiting
// Driver brings with it (lua/redlock_ticket.lua), so that the masters agree
// on its head. Only the head is granted a free lock and woken by a release;
// the others are refused on every master and wait for their turn instead of
// splitting the masters' votes among themselves.

// rlAcquireScript is acquire.lua behind redlock_ticket.lua: the waiter's
// entry is written with its ticket before the acquisition looks at the
// queue, in the same round trip.
var rlAcquireScript = goredis.NewScript(prelude + luaScript("redlock_ticket") + luaScript("acquire"))

// rlRequeueScript is release.lua behind redlock_requeue.lua: a failed
// queued attempt is released with its waiter's entry written back first.
var rlRequeueScript = goredis.NewScript(prelude + luaScript("redlock_requeue") + luaScript("release"))

// rlRelease releases hold id on one master for a failed attempt; when the
// attempt was queued (waiter not empty), the waiter keeps its place.
func rlRelease(ctx context.Context, c goredis.Scripter, n names, id, waiter string, life time.Duration, ticket uint64) (bool, error) {
	if waiter == "" {
		return release(ctx, c, n, id, "PUBLISH")
	}
	ok, err := rlRequeueScript.Run(ctx, c, []string{n.lock, n.waiters()}, id, n.channel(), "PUBLISH",
		waiter, millis(life), strconv.FormatUint(ticket, 10)).Int64()
	return ok == 1, err
}

// rlQueue is what a RedLock remembers of the queues it waits in.
type rlQueue struct {
	masters int // the RedLock's masters, whose wake-ups are counted apart
	mu      sync.Mutex
	waits   map[string]*rlWait // by lock name: the Driver waits for it
	subs    map[string]int     // by lock name: the Driver's open subscriptions
	last    uint64             // the latest ticket issued, for strictly increasing tickets
}

// rlWait is the Driver's wait for one lock.
type rlWait struct {
	ticket uint64
	wakes  []uint64 // wake-ups received for the lock so far, by master
	// When a majority of masters refused the latest attempt, another
	// before quiet (their earliest "come back" time) would be refused too
	// unless at least need of the masters that refused it (refusers) sent
	// a wake-up since the attempt started (their count in wakes above
	// quietWakes): see rlQueue.start.
	quiet      time.Time
	quietWakes []uint64
	refusers   []bool
	need       int
}

// ticket returns the Driver's ticket for the lock n, issuing one when the
// Driver is not waiting for it yet: the client's clock in µs, above every
// ticket issued before. Tickets of different Drivers are compared on the
// masters: clocks that disagree make the order less fair between them,
// never different from one master to the next.
func (q *rlQueue) ticket(n names) uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	if w, ok := q.waits[n.lock]; ok {
		return w.ticket
	}
	t := max(uint64(time.Now().UnixMicro()), q.last+1)
	q.last = t
	q.waits[n.lock] = &rlWait{ticket: t, wakes: make([]uint64, q.masters)}
	return t
}

// start is called as a queued attempt for the lock n starts. It returns
// the wake-ups received so far (a copy, by master), and, when the masters'
// latest refusal still stands (too few of the masters that refused it
// woke the Driver since, and their "come back" time not reached), how
// long it stands: the attempt is then refused without asking them.
//
// This is what keeps the waiters behind the head quiet. The core polls
// beside notifications, from every 50 ms; each poll of a RedLock asks every
// master, and under contention those polls were most of the requests per
// critical section. A poll the masters would refuse asks nothing: the
// queue's head learns of its turn from the release's wake-up, and a change
// nothing announces (a holder's lease expiring, a head leaving the queue,
// an entry lapsing) is found by the poll after the masters' "come back"
// time, at most a third of an entry's lifetime (see queueLife), as the
// queue's own rules intend.
//
// Nor does the head ask at the first master's wake-up. A release frees
// the lock on every master at about the same time, and each master that
// names the Driver as its head wakes it; but an attempt sent at the first
// wake-up reaches masters whose release has not yet run, which refuse it,
// and an attempt that then falls short of a majority is given back and
// sent again: under contention these were most of the requests beyond a
// grant's own. A master that refused can grant only once its lock is
// free, and freeing it (a release, or a failed attempt's give-back)
// wakes its head, or every waiter when none is queued there; so until
// enough of the masters that refused have sent a wake-up to make a
// majority with the others, the attempt would be refused again. A change
// that wakes nobody (a lease expiring, a queue entry lapsing) is found
// after the come-back time, as before.
func (q *rlQueue) start(n names) (wakes []uint64, wait time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	w, ok := q.waits[n.lock]
	if !ok {
		return nil, 0
	}
	wakes = slices.Clone(w.wakes)
	if w.quietWakes == nil {
		return wakes, 0
	}
	woke := 0
	for i, refused := range w.refusers {
		if refused && w.wakes[i] > w.quietWakes[i] {
			woke++
		}
	}
	if woke < w.need {
		if left := time.Until(w.quiet); left > 0 {
			return wakes, left
		}
	}
	return wakes, 0
}

// refused records that the masters marked in refusers (a majority's
// worth: more than there are masters beyond a quorum) refused the queued
// attempt for the lock n that started after wakes wake-ups, and asked it
// to come back after retry; quorum is the majority a grant needs. The
// next attempt asks the masters once enough of those have woken the
// Driver that, with the masters that did not refuse, they make a quorum
// (see start).
func (q *rlQueue) refused(n names, wakes []uint64, refusers []bool, quorum int, retry time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	w, ok := q.waits[n.lock]
	if !ok || retry <= 0 || len(wakes) != len(w.wakes) || len(refusers) != len(w.wakes) {
		return
	}
	refused := 0
	for _, r := range refusers {
		if r {
			refused++
		}
	}
	w.quiet, w.quietWakes, w.refusers = time.Now().Add(retry), wakes, refusers
	// Masters that did not refuse: len(refusers) - refused. A grant needs
	// quorum - (len(refusers) - refused) of the others to change their answer.
	w.need = max(quorum-(len(refusers)-refused), 1)
}

// woke counts a wake-up for the lock n from master i: a release there, or
// a subscription there taking effect.
func (q *rlQueue) woke(n names, i int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if w, ok := q.waits[n.lock]; ok && i < len(w.wakes) {
		w.wakes[i]++
	}
}

// done forgets the Driver's ticket for the lock n, and reports whether
// there was one.
func (q *rlQueue) done(n names) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	_, ok := q.waits[n.lock]
	delete(q.waits, n.lock)
	return ok
}

// subscribed counts a subscription to the lock n opening (+1) or closing
// (-1), and reports how many remain open.
func (q *rlQueue) subscribed(n names, delta int) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	c := q.subs[n.lock] + delta
	if c <= 0 {
		delete(q.subs, n.lock)
		return 0
	}
	q.subs[n.lock] = c
	return c
}

// waiterFor returns the queue name and ticket req waits with on the
// masters, or "" and 0 when it does not queue: as on a single server, only
// plain exclusive requests the core sends while it holds a subscription
// (driver.Request.Wait) queue.
func (r *RedLock) waiterFor(n names, req driver.Request) (string, uint64) {
	if !req.Wait || req.Mode != driver.Exclusive || req.Owner != "" {
		return "", 0
	}
	return r.self, r.queue.ticket(n)
}

// rlAcquire runs the acquire script on one master for req, queueing as
// waiter with ticket when waiter is not empty. The hold is pending until
// the second phase settles it (fence), so that Inspect does not report a
// token the lease may not get (see RedLock.Inspect).
func rlAcquire(ctx context.Context, c goredis.Scripter, n names, req driver.Request, waiter string, ticket uint64) (grant, error) {
	if waiter == "" {
		return runAcquire(ctx, acquireScript, c, n, req, "", blockFor(req), true)
	}
	return runAcquire(ctx, rlAcquireScript, c, n, req, waiter, blockFor(req), true, strconv.FormatUint(ticket, 10))
}

// leave takes the Driver out of the lock n's queue on the masters for
// which want is true (every master when want is nil). A master that misses
// it, within subscribeTimeout (a short write), keeps the entry until it lapses, a third of a second to two seconds
// (see queueLife), during which it names a head that no longer asks.
func (r *RedLock) leave(ctx context.Context, n names, want []bool) {
	r.each(ctx, subscribeTimeout, want, func(ctx context.Context, _ int, nd *rlNode) {
		_ = leaveScript.Run(ctx, nd.client, []string{n.waiters()}, r.self).Err()
	})
}

// granted ends the Driver's wait for the lock n once a majority granted it:
// each master that granted took the Driver out of its queue, and the others
// are told to, in the background (Close waits for it), so that a master
// that refused or missed the winning attempt does not keep naming it as
// its head.
func (r *RedLock) granted(ctx context.Context, n names, grants []bool) {
	if !r.queue.done(n) {
		return
	}
	others := make([]bool, len(grants))
	some := false
	for i, g := range grants {
		others[i] = !g
		some = some || !g
	}
	if !some {
		return
	}
	r.subMu.Lock()
	defer r.subMu.Unlock()
	if r.closed.Load() {
		return
	}
	ctx = context.WithoutCancel(ctx)
	r.subscribing.Go(func() { r.leave(ctx, n, others) })
}

// unsubscribed is called when a subscription to the lock n closes: when it
// was the Driver's last one and the Driver was waiting, its waiter gave up
// (or got the lock some other way), so it leaves the queue on every master,
// in the background (Close waits for it), rather than holding up the others
// until its entry lapses.
func (r *RedLock) unsubscribed(n names) {
	if r.queue.subscribed(n, -1) > 0 || !r.queue.done(n) {
		return
	}
	r.subMu.Lock()
	defer r.subMu.Unlock()
	if r.closed.Load() {
		return
	}
	r.subscribing.Go(func() { r.leave(context.Background(), n, nil) })
}
