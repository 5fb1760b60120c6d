package conformance

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
)

// The semaphore cases: dlock's Semaphore, which the core builds over the
// driver's locks, keeps its promises on every driver.

func testSemaphoreBound(t *T, e *env) {
	const permits, clients, workers, rounds = 3, 4, 3, 5
	key := e.key("semaphore")
	var ph permitHolds
	var wg sync.WaitGroup
	for client := range clients {
		s := e.semaphore(t, e.client(t), key, permits)
		for w := range workers {
			// One goroutine per client only tries: it takes free permits
			// beside the waiters, who queue at the gate.
			try := w == 0
			wg.Go(func() {
				for range rounds {
					start := time.Now()
					acquire := s.Acquire
					if try {
						acquire = s.TryAcquire
					}
					l, err := acquire(t.Context())
					switch {
					case try && errors.Is(err, dlock.ErrLocked):
						continue
					case err != nil:
						t.Errorf("client %d goroutine %d: %v", client, w, err)
						return
					}
					h := watch(l, client, w, start)
					// The work, while others contend for the permits.
					time.Sleep(e.ttl / 100)
					ph.unlock(t, h)
				}
			})
		}
	}
	wg.Wait()
	ph.judge(t, e, permits)
}

func testSemaphoreTryAcquire(t *T, e *env) {
	const permits = 2
	key := e.key("semaphore-try")
	sa, sb := e.semaphore(t, e.client(t), key, permits), e.semaphore(t, e.client(t), key, permits)
	sc := e.semaphore(t, e.client(t), key, permits)
	la := acquirePermit(t, sa)
	lb, err := sb.TryAcquire(t.Context())
	if err != nil {
		t.Fatalf("TryAcquire with a permit free: %v", err)
	}
	if la.Key() == lb.Key() {
		t.Errorf("two holders of one permit, %q", la.Key())
	}
	for range 3 {
		if l, err := sc.TryAcquire(t.Context()); !errors.Is(err, dlock.ErrLocked) {
			if err == nil {
				_ = l.Unlock(t.Context())
			}
			t.Fatalf("TryAcquire with every permit held: got %v, want ErrLocked", err)
		}
	}
	// An Acquire whose context ends while every permit is held.
	ctx, cancel := contextWithTimeout(t, e.ttl/4)
	l, err := sc.Acquire(ctx)
	cancel()
	if err != context.DeadlineExceeded {
		if err == nil {
			_ = l.Unlock(t.Context())
		}
		t.Fatalf("Acquire whose context ended with every permit held: got %v, want exactly context.DeadlineExceeded", err)
	}
	for _, l := range []dlock.Lease{la, lb} {
		if err := l.Extend(t.Context()); err != nil {
			t.Errorf("holder's Extend after failed tries: %v; they must not disturb the holders", err)
		}
	}
	unlock(t, la)
	unlock(t, lb)
	// Nothing was left behind: every lock of the semaphore is free, and
	// another client takes every permit at once.
	probe := e.client(t)
	for _, k := range permitKeys(key, permits) {
		expectFree(t, e.mutex(t, probe, k), "the semaphore's permits were given back, and the failed tries and the cancelled Acquire must leave nothing behind")
	}
	sd := e.semaphore(t, probe, key, permits)
	var got []dlock.Lease
	for range permits {
		l, err := sd.TryAcquire(t.Context())
		if err != nil {
			t.Fatalf("TryAcquire after every permit was given back: %v; the failed tries left something behind", err)
		}
		got = append(got, l)
	}
	for _, l := range got {
		unlock(t, l)
	}
}

func testSemaphoreHolderVanishes(t *T, e *env) {
	const permits = 2
	key := e.key("semaphore-vanish")
	da := e.driver(t)
	ca, err := dlock.New(da, dlock.WithTTL(e.ttl))
	if err != nil {
		t.Fatalf("dlock.New: %v", err)
	}
	t.Cleanup(func() { _ = ca.Close(t.Context()) })
	sa := e.semaphore(t, ca, key, permits)
	held := map[string]dlock.Lease{}
	acquired := time.Now()
	for range permits {
		l := acquirePermit(t, sa)
		held[l.Key()] = l
	}
	_ = da.Close() // the holder vanishes: its connection ends, nothing is given back

	sb := e.semaphore(t, e.client(t), key, permits)
	var got []dlock.Lease
	for i := range permits {
		l := acquireWithin(t, sb, time.Until(acquired.Add(e.ttl+e.slack)), "Acquire after the holder vanished")
		got = append(got, l)
		if old := held[l.Key()]; old != nil {
			select {
			case <-old.Done():
			default:
				if time.Now().Before(old.Deadline()) {
					t.Errorf("permit %d (%q) was granted again before the vanished holder's deadline, and the holder was not told", i+1, l.Key())
				}
			}
			if a, b := old.Token(), l.Token(); a != 0 && b <= a {
				t.Errorf("permit %q: token %d after the vanished holder's %d", l.Key(), b, a)
			}
		}
	}
	for _, l := range held {
		within(t, l.Done(), time.Until(l.Deadline())+e.slack, "the vanished holder's lost signal")
	}
	for _, l := range got {
		unlock(t, l)
	}
}

// testSemaphoreFrozenHolder freezes a client that holds every permit while
// a third goroutine of it waits at the gate: its renewals stall, another
// client gets a permit (within the TTL where nothing but renewals keeps
// it), and no goroutine of the frozen client trusts a lapsed permit
// meanwhile, or is handed one after the thaw.
func testSemaphoreFrozenHolder(t *T, e *env) {
	const permits = 2
	key := e.key("semaphore-frozen")
	var ice freezer
	var ph permitHolds
	fc := e.client(t, withFault(&ice))
	frozen := e.semaphore(t, fc, key, permits)
	other := e.semaphore(t, e.client(t), key, permits)
	thawed := make(chan struct{})
	holdUntilThaw := func(w *held) {
		select {
		case <-w.l.Done():
		case <-thawed:
		}
		ph.unlock(t, w)
	}
	var wg sync.WaitGroup
	for i := range permits {
		start := time.Now()
		w := watch(acquirePermit(t, frozen), 0, i, start)
		wg.Go(func() { holdUntilThaw(w) })
	}
	wg.Go(func() {
		start := time.Now()
		l, err := frozen.Acquire(t.Context())
		if err != nil {
			t.Errorf("frozen client's waiting goroutine: Acquire: %v", err)
			return
		}
		holdUntilThaw(watch(l, 0, permits, start))
	})
	gate := e.mutex(t, e.client(t), key+"/gate")
	waitFor(t, e.slack, "the frozen client's third goroutine to hold the gate", func() bool { return gateHeld(t, gate) })

	wo := outlastFreeze(t, e, &ice, thawed, other.Acquire)
	ph.unlock(t, wo)
	wg.Wait()
	ph.judge(t, e, permits)
}

// testSemaphorePartitionedHolder cuts a client that holds every permit off
// from the backend: another client gets a permit within the TTL, never
// before the cut-off holder's deadline without it being told; the cut-off
// holder's lost signals fire by their deadlines; and once the link is back
// its Unlocks touch nothing.
func testSemaphorePartitionedHolder(t *T, e *env) {
	e.needLinks(t)
	const permits = 2
	key := e.key("semaphore-partitioned")
	ca, link := e.linkedClient(t)
	sa := e.semaphore(t, ca, key, permits)
	sb := e.semaphore(t, e.client(t), key, permits)
	held := map[string]dlock.Lease{}
	for range permits {
		l := acquirePermit(t, sa)
		held[l.Key()] = l
	}
	time.Sleep(e.ttl / 2) // hold long enough for a renewal to go through
	cutAt := cut(t, link)

	lb := acquireWithin(t, sb, time.Until(cutAt.Add(e.ttl+e.slack)), "another client's Acquire while the holder is cut off")
	granted := time.Now()
	old := held[lb.Key()]
	if old == nil {
		t.Fatalf("the new holder's permit %q is none of the cut-off holder's, though it held all %d", lb.Key(), permits)
	}
	select {
	case <-old.Done():
	default:
		if deadline := old.Deadline(); granted.Before(deadline) {
			t.Errorf("two holders of permit %q: granted to another client %v before the cut-off holder's deadline, and the cut-off holder was not told", lb.Key(), deadline.Sub(granted))
		}
	}
	for _, l := range held {
		within(t, l.Done(), time.Until(cutAt.Add(e.ttl))+e.slack, "the cut-off holder's lost signal")
		if err := l.Err(); !errors.Is(err, dlock.ErrLockLost) {
			t.Errorf("Err of the cut-off holder's permit: got %v, want ErrLockLost", err)
		}
	}

	restore(t, link)
	actx, acancel := e.afterRestore(t)
	defer acancel()
	for _, l := range held {
		if err := l.Unlock(actx); !errors.Is(err, dlock.ErrLockLost) {
			t.Errorf("the cut-off holder's Unlock after the link came back: got %v, want ErrLockLost", err)
		}
	}
	expectLocked(t, e.mutex(t, e.client(t), lb.Key()), "the cut-off holder's Unlock after the link came back must leave the new holder's permit alone")
	if err := lb.Err(); err != nil {
		t.Errorf("the new holder's permit ended once the cut-off holder's link came back: %v", err)
	}
	if a, b := old.Token(), lb.Token(); a != 0 && b <= a {
		t.Errorf("permit %q: the new holder's token %d is not above the cut-off holder's %d", lb.Key(), b, a)
	}
	unlock(t, lb)
}
