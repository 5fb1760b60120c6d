package dlock

import (
	"container/heap"
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/deadline"
)

// Batched renewal: each Client has one renewer, a heap of its held leases by
// when each is due, and one timer for the earliest. When it fires, every
// lease due within half its renewal interval is renewed with it, in one round
// trip where the driver has a BatchExtender. So renewal costs no goroutine per
// held lock, and leases acquired at different moments fall into step after
// their first renewal, sharing round trips from then on.
//
// The renewer also keeps the leases' validity deadlines, in a queue of its
// own with one timer (expiries): a renewal moves a deadline, and a deadline
// that comes unconfirmed loses its lease, whether or not it is renewed.

// renewer schedules the renewal and the expiry of one Client's leases.
type renewer struct {
	c     *Client
	mu    sync.Mutex // the lock order: handoff.go
	due   leaseHeap
	timer *time.Timer
	armed time.Time // when the timer fires; zero when it is not set
	// expiry is the queue of the Client's leases by validity deadline,
	// with its own lock. It runs on after stop: a lease's deadline passing
	// during Close still loses it, and once every lease has ended the
	// queue holds no timer. Set once, by init.
	expiry *deadline.Queue[*lease]
}

// init makes r the renewer of c, before c is used.
func (r *renewer) init(c *Client) {
	r.c, r.expiry = c, deadline.NewQueue((*lease).expire)
}

// extendParallelism bounds the Extend calls in flight for a driver that
// cannot batch them.
const extendParallelism = 16

// schedule makes l due at.
func (r *renewer) schedule(l *lease, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l.ended.Load() {
		return // it ended while its renewal was under way
	}
	l.renewAt = at
	if l.heapIndex >= 0 {
		heap.Fix(&r.due, l.heapIndex)
	} else {
		heap.Push(&r.due, l)
	}
	r.arm()
}

// remove unschedules l.
func (r *renewer) remove(l *lease) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l.heapIndex >= 0 {
		heap.Remove(&r.due, l.heapIndex)
		r.arm()
	}
}

// arm makes sure the timer fires by the earliest due lease. It moves the
// timer only to fire earlier: a timer that fires early finds nothing due
// and is armed again, and one left when the last lease goes fires once for
// nothing. So taking and releasing a lock, when others are held or none,
// usually leaves the timer alone, and resetting a timer can cost a wake-up
// of the runtime's network poller. Callers hold r.mu.
func (r *renewer) arm() {
	if len(r.due) == 0 {
		return
	}
	at := r.due[0].renewAt
	if !r.armed.IsZero() && !r.armed.After(at) {
		return
	}
	r.armed = at
	if r.timer == nil {
		r.timer = time.AfterFunc(time.Until(at), r.fire)
	} else {
		r.timer.Reset(time.Until(at))
	}
}

func (r *renewer) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.timer != nil {
		r.timer.Stop()
		r.armed = time.Time{}
	}
}

// fire renews every lease that is due, and with them every lease that would
// be due before the next renewal of theirs: renewing a lease early is safe,
// and it puts the leases of a Client in step, one batch per renewal
// interval however spread out their acquisitions were, where renewing only
// the nearly due would leave them in groups half an interval apart.
func (r *renewer) fire() {
	if !r.c.beginOp() {
		return
	}
	defer r.c.ops.Done()
	now := time.Now()
	r.mu.Lock()
	r.armed = time.Time{} // this was the timer firing
	var batch []*lease
	for len(r.due) > 0 {
		l := r.due[0]
		if l.renewAt.Sub(now) > l.renewInterval() {
			break
		}
		heap.Pop(&r.due)
		batch = append(batch, l)
	}
	r.arm()
	r.mu.Unlock()
	if len(batch) > 0 {
		r.renew(batch)
	}
}

// renew extends a batch of leases and schedules each one's next renewal.
func (r *renewer) renew(batch []*lease) {
	// Close must not wait for a hung backend.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := context.AfterFunc(r.c.closing, cancel)
	defer stop()

	errs, started := r.extend(ctx, batch)
	for i, l := range batch {
		if next, ok := l.confirm(started[i], errs[i]); ok {
			r.schedule(l, next)
		}
	}
}

// attemptDeadline bounds one renewal attempt of l starting at start: an
// attempt that cannot finish before the deadline is useless, and one gets a
// third of the validity, so that a hung one is retried, and reported by
// Uncertain, in time.
func attemptDeadline(l *lease, start time.Time) time.Time {
	return earliest(start.Add(l.renewInterval()), l.Deadline())
}

// extend extends every lease of the batch: in one call when the driver
// batches, otherwise a few at a time, each attempt bounded on its own. It
// returns each lease's outcome and when its extension started.
func (r *renewer) extend(ctx context.Context, batch []*lease) ([]error, []time.Time) {
	errs := make([]error, len(batch))
	started := make([]time.Time, len(batch))
	if be := r.c.caps.BatchExtender; be != nil {
		start := time.Now()
		limit := attemptDeadline(batch[0], start)
		leases := make([]driver.Lease, len(batch))
		ttls := make([]time.Duration, len(batch))
		for i, l := range batch {
			leases[i], ttls[i], started[i] = l.d, l.m.cfg.ttl, start
			limit = earliest(limit, attemptDeadline(l, start))
		}
		bctx, cancel := context.WithDeadline(ctx, limit)
		defer cancel()
		r.c.tel.batches.Add(ctx, 1)
		if got := be.ExtendBatch(bctx, leases, ttls); len(got) == len(batch) {
			return got, started
		}
		// A driver that breaks the contract fails every lease of the batch,
		// rather than the core guessing which ones it renewed.
		for i := range errs {
			errs[i] = errBatchMismatch
		}
		return errs, started
	}
	r.c.tel.batches.Add(ctx, int64(len(batch)))
	sem := make(chan struct{}, extendParallelism)
	var wg sync.WaitGroup
	for i, l := range batch {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			started[i] = time.Now()
			lctx, cancel := context.WithDeadline(ctx, attemptDeadline(l, started[i]))
			defer cancel()
			errs[i] = l.d.Extend(lctx, l.m.cfg.ttl)
		})
	}
	wg.Wait()
	return errs, started
}

// retryDelay is how soon a failed renewal is tried again: a tenth of the TTL,
// spread out; the lease's deadline bounds how long it keeps trying.
func retryDelay(ttl time.Duration) time.Duration {
	d := max(ttl/10, time.Millisecond)
	return d/2 + rand.N(d/2+1)
}

func earliest(t time.Time, others ...time.Time) time.Time {
	for _, o := range others {
		if o.Before(t) {
			t = o
		}
	}
	return t
}

// leaseHeap orders leases by when they are due for renewal.
type leaseHeap []*lease

func (h leaseHeap) Len() int           { return len(h) }
func (h leaseHeap) Less(i, j int) bool { return h[i].renewAt.Before(h[j].renewAt) }
func (h leaseHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIndex, h[j].heapIndex = i, j
}
func (h *leaseHeap) Push(x any) {
	l := x.(*lease)
	l.heapIndex = len(*h)
	*h = append(*h, l)
}
func (h *leaseHeap) Pop() any {
	old := *h
	l := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	l.heapIndex = -1
	return l
}

// errBatchMismatch: a BatchExtender returned a number of results other than
// the number of leases it was given.
var errBatchMismatch = errors.New("dlock: driver returned the wrong number of batch results")
