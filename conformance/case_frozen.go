package conformance

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
)

// holds records the holds of a case, for judge.
type holds struct {
	mu  sync.Mutex
	all []hold
}

// held is a lease being watched: it notes when the lease ended.
type held struct {
	l     dlock.Lease
	h     hold
	ended chan time.Time
}

// watch starts recording l, granted to a Lock call that began at start.
func watch(l dlock.Lease, client, worker int, start time.Time) *held {
	w := &held{l: l, h: hold{client: client, worker: worker, token: l.Token(), start: start, granted: time.Now(), deadline: l.Deadline()}, ended: make(chan time.Time, 1)}
	go func() { <-l.Done(); w.ended <- time.Now() }()
	return w
}

// unlock unlocks the lease and records its hold, trusted until now, its
// deadline, or its loss, whichever came first.
func (hs *holds) unlock(t *T, w *held) {
	lost := w.l.Err() != nil
	w.h.end = earliest(time.Now(), w.l.Deadline()) // as renewed so far
	err := w.l.Unlock(t.Context())
	if lost {
		w.h.end = earliest(w.h.end, <-w.ended)
	}
	if err != nil && !errors.Is(err, dlock.ErrLockLost) {
		t.Errorf("Unlock: %v", err)
	}
	hs.mu.Lock()
	hs.all = append(hs.all, w.h)
	hs.mu.Unlock()
}

func (hs *holds) judge(t *T, e *env) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	for _, h := range hs.all {
		t.Logf("hold: %v", h)
	}
	v := judge(t, e, hs.all)
	t.Logf("%d holds: %d overlaps, %d token regressions, %d deadlines past Lock's return+TTL", len(hs.all), v.overlaps, v.regressions, v.late)
}

// freezeLength is how long a frozen client stays frozen: longer than the
// TTL, so that what it held or was granted lapses on the backend.
func freezeLength(e *env) time.Duration { return 2 * e.ttl }

// testFrozenWaiter freezes a client whose three goroutines wait for a lock,
// then releases the lock: whatever the frozen client was granted meanwhile
// lapses, another client takes the lock and holds it across the thaw, and
// the frozen client's goroutines must then wait for it, not come out with
// the lapsed grant or hand it to each other.
func testFrozenWaiter(t *T, e *env) {
	const waiters = 3
	key := e.key("frozen-waiter")
	var ice freezer
	var hs holds
	holder, other := e.mutex(t, e.client(t), key), e.mutex(t, e.client(t), key)
	fc := e.client(t, withFault(&ice))
	frozen := e.mutex(t, fc, key)

	lh := lock(t, holder)
	var wg sync.WaitGroup
	for w := range waiters {
		wg.Go(func() {
			start := time.Now()
			l, err := frozen.Lock(t.Context())
			if err != nil {
				t.Errorf("frozen client's Lock after the thaw: %v", err)
				return
			}
			hs.unlock(t, watch(l, 0, w, start))
		})
	}
	// ... with a request of theirs at the backend, or done: a Lock's
	// first try may come after the others are in line.
	waitFor(t, e.slack, "the frozen client's goroutines to wait", func() bool { return fc.Waiters(key) == waiters && ice.reachedBackend() > 0 })

	ice.freeze(t)
	frozenAt := time.Now()
	if err := lh.Unlock(t.Context()); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	// Another client gets the lock once the frozen client's grant, if it
	// had one, lapsed; it holds it until after the thaw.
	thawAt := frozenAt.Add(freezeLength(e))
	ctx, cancel := contextWithTimeout(t, freezeLength(e)+e.ttl+e.slack)
	defer cancel()
	start := time.Now()
	lo, err := other.Lock(ctx)
	if err != nil {
		ice.thaw()
		t.Fatalf("another client's Lock while the waiter is frozen: %v", err)
	}
	wo := watch(lo, 1, 0, start)
	time.Sleep(time.Until(thawAt)) // the length of the fault
	ice.thaw()
	time.Sleep(e.ttl / 2) // the other client still holds the lock after the thaw
	hs.unlock(t, wo)
	wg.Wait()
	hs.judge(t, e)
}

// testFrozenHolder freezes a client while one goroutine holds a lock and
// another waits for it: the holder's renewals stall, another client gets the
// lock (within the TTL where nothing but renewals keeps it), and neither
// goroutine of the frozen client may trust the lapsed hold meanwhile, nor be
// handed it after the thaw.
func testFrozenHolder(t *T, e *env) {
	key := e.key("frozen-holder")
	var ice freezer
	var hs holds
	fc := e.client(t, withFault(&ice))
	frozen, other := e.mutex(t, fc, key), e.mutex(t, e.client(t), key)
	thawed := make(chan struct{})
	// Each goroutine of the frozen client holds until its lease ends or the
	// client thaws, whichever comes first.
	holdUntilThaw := func(w *held) {
		select {
		case <-w.l.Done():
		case <-thawed:
		}
		hs.unlock(t, w)
	}

	start := time.Now()
	wa := watch(lock(t, frozen), 0, 0, start)
	var wg sync.WaitGroup
	wg.Go(func() { holdUntilThaw(wa) })
	wg.Go(func() {
		start := time.Now()
		l, err := frozen.Lock(t.Context())
		if err != nil {
			t.Errorf("frozen client's second goroutine: Lock: %v", err)
			return
		}
		holdUntilThaw(watch(l, 0, 1, start))
	})
	waitFor(t, e.slack, "the second goroutine to wait", func() bool { return fc.Waiters(key) == 1 })

	wo := outlastFreeze(t, e, &ice, thawed, other.Lock)
	hs.unlock(t, wo)
	wg.Wait()
	hs.judge(t, e)
}

// outlastFreeze freezes ice's client, whose goroutines hold what another
// client's take then waits for; thaws it after freezeLength, closing
// thawed; and returns the other client's hold, watched, once it has held
// it past the thaw. The backend frees the frozen client's hold within the
// TTL of the last renewal, where a hold lasts as long as its renewals;
// where it lasts as long as a session that the client library keeps alive
// by itself (which this freeze does not stop), it frees once the thawed
// client gives it up.
func outlastFreeze(t *T, e *env, ice *freezer, thawed chan struct{}, take func(context.Context) (dlock.Lease, error)) *held {
	ice.freeze(t)
	frozenAt := time.Now()
	ctx, cancel := context.WithDeadline(t.Context(), frozenAt.Add(freezeLength(e)+e.ttl+e.slack))
	defer cancel()
	start := time.Now()
	lo, err := take(ctx)
	if err != nil {
		ice.thaw()
		close(thawed)
		t.Fatalf("another client's acquisition while the holder is frozen: got %v, want the lock by the thaw plus the TTL and a margin", err)
	}
	if took := time.Since(frozenAt); took > e.ttl+e.slack {
		t.Logf("another client got the lock %v after the freeze, later than the TTL plus a margin: the backend kept the frozen client's lock (its session is kept alive beside the driver's calls)", took)
	}
	wo := watch(lo, 1, 0, start)
	time.Sleep(time.Until(frozenAt.Add(freezeLength(e)))) // the length of the fault
	ice.thaw()
	close(thawed)
	time.Sleep(e.ttl / 2) // the other client still holds the lock after the thaw
	return wo
}
