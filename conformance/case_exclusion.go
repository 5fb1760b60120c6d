package conformance

import (
	"errors"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
)

func testMutualExclusion(t *T, e *env) {
	const clients, workers, rounds = 8, 4, 5
	contend(t, e, clients, workers, rounds, func(int) bool { return false })
}

func testReadWriteExclusion(t *T, e *env) {
	if !e.caps.Shared {
		t.Skipf("the driver has no read-write locks")
	}
	const clients, workers, rounds = 4, 4, 5
	contend(t, e, clients, workers, rounds, func(w int) bool { return w%2 == 0 })
}

// contend runs workers on independent clients against one key and checks the
// guard: shared(w) tells whether worker w takes read locks.
func contend(t *T, e *env, clients, workers, rounds int, shared func(int) bool) {
	key := e.key("contend")
	var g guard
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	writes := 0
	for range clients {
		c := e.client(t)
		var rw dlock.RWMutex
		m := e.mutex(t, c, key)
		if e.caps.Shared {
			rw = e.rwmutex(t, c, key)
		}
		for w := range workers {
			read := shared(w)
			if !read {
				writes += rounds
			}
			wg.Go(func() {
				for range rounds {
					lockFn := m.Lock
					if read {
						lockFn = rw.RLock
					}
					l, err := lockFn(t.Context())
					if err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
						return
					}
					// A careful holder checks its lease before acting.
					if g.enter(l.Token(), read) && !read && l.Err() == nil {
						g.write()
					}
					g.leave(read)
					if err := l.Unlock(t.Context()); err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
						return
					}
				}
			})
		}
	}
	wg.Wait()
	for _, err := range errs {
		t.Errorf("worker: %v", err)
	}
	violations, value := g.report()
	for _, v := range violations {
		t.Errorf("guard: %s", v)
	}
	if len(errs) == 0 && value != writes {
		t.Errorf("guarded value: got %d, want %d (writes lost to overlapping holders)", value, writes)
	}
}

func testTryLockHeld(t *T, e *env) {
	key := e.key("trylock")
	ma, mb := e.mutex(t, e.client(t), key), e.mutex(t, e.client(t), key)
	la := lock(t, ma)
	start := time.Now()
	expectLocked(t, mb, "another client holds the lock", la)
	if took := time.Since(start); took > e.slack {
		t.Errorf("TryLock on a held lock took %v, want an immediate answer", took)
	}
	if err := la.Extend(t.Context()); err != nil {
		t.Fatalf("holder's Extend after a failed TryLock: %v; TryLock must not disturb the holder", err)
	}
	unlock(t, la)
	expectFree(t, mb, "the holder unlocked")
}

func testDoubleUnlock(t *T, e *env) {
	key := e.key("double")
	ma, mb, mc := e.mutex(t, e.client(t), key), e.mutex(t, e.client(t), key), e.mutex(t, e.client(t), key)
	la := lock(t, ma)
	unlock(t, la)
	lb := lock(t, mb)
	if err := la.Unlock(t.Context()); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("second Unlock: got %v, want ErrNotHeld", err)
	}
	expectLocked(t, mc, "B holds the lock; A's second Unlock must not release it", lb)
	unlock(t, lb)
}

func testReentrancy(t *T, e *env) {
	if !e.caps.Reentrant {
		t.Skipf("the driver has no reentrant locks")
	}
	key := e.key("reentrant")
	ca, cb := e.client(t), e.client(t)
	a1 := e.mutex(t, ca, key, dlock.WithOwner("owner-a"))
	a2 := e.mutex(t, cb, key, dlock.WithOwner("owner-a"))
	b := e.mutex(t, cb, key, dlock.WithOwner("owner-b"))
	plain := e.mutex(t, e.client(t), key)

	l1 := lock(t, a1)
	l2, err := a1.TryLock(t.Context())
	if err != nil {
		t.Fatalf("re-entry by the same owner on the same client: %v", err)
	}
	l3, err := a2.TryLock(t.Context())
	if err != nil {
		t.Fatalf("re-entry by the same owner on another client: %v", err)
	}
	if l2.Token() != l1.Token() || l3.Token() != l1.Token() {
		t.Errorf("re-entry tokens: got %d, %d, %d, want one token (re-entry is not a new grant)", l1.Token(), l2.Token(), l3.Token())
	}
	expectLocked(t, b, "owner-a holds the lock three times")
	expectLocked(t, plain, "owner-a holds the lock three times")
	unlock(t, l1)
	expectLocked(t, b, "owner-a still holds two entries")
	unlock(t, l3)
	expectLocked(t, b, "owner-a still holds one entry")
	unlock(t, l2)
	if err := l2.Unlock(t.Context()); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("second Unlock of an entry: got %v, want ErrNotHeld", err)
	}
	expectFree(t, b, "every entry of owner-a was unlocked")
}

func testReadersShare(t *T, e *env) {
	if !e.caps.Shared {
		t.Skipf("the driver has no read-write locks")
	}
	key := e.key("readers")
	r1, r2 := e.rwmutex(t, e.client(t), key), e.rwmutex(t, e.client(t), key)
	w := e.mutex(t, e.client(t), key)

	l1, err := r1.RLock(t.Context())
	if err != nil {
		t.Fatalf("first RLock: %v", err)
	}
	l2, err := r2.TryRLock(t.Context())
	if err != nil {
		t.Fatalf("second reader: got %v, want to share the lock with the first", err)
	}
	expectLocked(t, w, "two readers are inside")
	unlock(t, l1)
	expectLocked(t, w, "the second reader is still inside after the first left")
	unlock(t, l2)
	lw, err := w.TryLock(t.Context())
	if err != nil {
		t.Fatalf("writer after every reader left: %v", err)
	}
	if l, err := r1.TryRLock(t.Context()); !errors.Is(err, dlock.ErrLocked) {
		if err == nil {
			_ = l.Unlock(t.Context())
		}
		t.Errorf("TryRLock while a writer holds the lock: got %v, want ErrLocked", err)
	}
	unlock(t, lw)
}

func testWaitersServedInOrder(t *T, e *env) {
	const waiters = 8
	key := e.key("fifo")
	holder := e.mutex(t, e.client(t), key)
	c := e.client(t)
	m := e.mutex(t, c, key)
	l := lock(t, holder)

	order := make(chan int, waiters)
	errs := make(chan error, waiters)
	for i := range waiters {
		go func() {
			l, err := m.Lock(t.Context())
			if err != nil {
				errs <- err
				return
			}
			order <- i
			errs <- l.Unlock(t.Context())
		}()
		// Start the next waiter only once this one is in line.
		waitFor(t, e.slack, "the waiter to queue", func() bool { return c.Waiters(key) == i+1 })
	}
	unlock(t, l)
	for range waiters {
		select {
		case err := <-errs:
			if err != nil {
				t.Errorf("waiter: %v", err)
			}
		case <-t.Context().Done():
			t.Fatalf("not every coalesced waiter acquired the lock")
		}
	}
	close(order)
	want := 0
	for got := range order {
		if got != want {
			t.Errorf("waiter %d acquired in turn %d: a client's waiters must be served in the order they arrived", got, want)
		}
		want++
	}
	if n := c.Waiters(key); n != 0 {
		t.Errorf("Waiters after every waiter acquired: got %d, want 0", n)
	}
}
