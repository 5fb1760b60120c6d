package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
)

// The order cases: where a harness declares that its backend serves waiting
// clients in arrival order (Harness.ClientsServedInOrder), clients waiting
// for one lock, each a Client of its own, get it in the order they queued at
// the backend, for a Mutex and for a Semaphore's gate. WaitersServedInOrder
// checks the order among one Client's goroutines, which the core keeps on
// every backend; only the backend's queue can keep it across clients.

// orderWaiters is how many clients queue behind the holder: with three, a
// backend that serves the newest first, or picks at random, shows.
const orderWaiters = 3

// skipUnlessOrdered skips the case unless the harness declares the order.
func skipUnlessOrdered(t *T, e *env) {
	if !e.h.ClientsServedInOrder {
		t.Skipf("the harness does not declare that its backend serves waiting clients in arrival order (Harness.ClientsServedInOrder)")
	}
}

func testClientsServedInOrder(t *T, e *env) {
	skipUnlessOrdered(t, e)
	key := e.key("order")
	q := newQueueWatch(t, e)
	holder := lock(t, e.mutex(t, e.client(t), key))
	var w orderWitness
	for i := range orderWaiters {
		m := e.mutex(t, e.client(t), key)
		w.start(t, e, i, m.Lock)
		// The next client starts only once this one is in the backend's
		// queue: then arrival order is known, not a race between them.
		q.waitWaiters(key, i+1, fmt.Sprintf("client %d to queue for the lock", i))
	}
	unlock(t, holder)
	w.judge(t, holder.Token(), "the lock")
}

func testSemaphoreClientsServedInOrder(t *T, e *env) {
	skipUnlessOrdered(t, e)
	key := e.key("semaphore-order")
	gate := key + "/gate" // as package dlock documents it; see permitKeys
	q := newQueueWatch(t, e)
	holder := acquirePermit(t, e.semaphore(t, e.client(t), key, 1))
	var w orderWitness
	for i := range orderWaiters {
		s := e.semaphore(t, e.client(t), key, 1)
		w.start(t, e, i, s.Acquire)
		if i == 0 {
			// The first takes the gate at once and waits, holding it, for
			// the permit; the others queue at the gate behind it.
			q.waitHeld(gate, "client 0 to take the semaphore's gate")
			continue
		}
		q.waitWaiters(gate, i, fmt.Sprintf("client %d to queue at the semaphore's gate", i))
	}
	unlock(t, holder)
	w.judge(t, holder.Token(), "the permit")
}

// queueWatch reads a lock's queue at the backend through the driver's
// Inspector, on a Client that takes no part in the case.
type queueWatch struct {
	t *T
	e *env
	c *dlock.Client
}

// newQueueWatch fails the case when the driver cannot report the queue:
// the declaration of order needs it, so that the case can start each client
// only once the one before it is queued (there is no other way to know,
// and a sleep would only guess).
func newQueueWatch(t *T, e *env) *queueWatch {
	if e.caps.Inspector == nil {
		t.Fatalf("the harness declares ClientsServedInOrder, which needs the driver's Inspector to report Info.Waiters (the case starts each waiting client once the one before it is queued), and the driver declares no Inspector")
	}
	return &queueWatch{t: t, e: e, c: e.client(t)}
}

// inspect describes key, failing the case when the driver does not count
// waiters.
func (q *queueWatch) inspect(key string) dlock.Info {
	ctx, cancel := context.WithTimeout(q.t.Context(), q.e.ttl+q.e.slack)
	defer cancel()
	info, err := q.c.Inspect(ctx, key)
	if err != nil {
		q.t.Fatalf("Inspect(%q): %v", key, err)
	}
	if info.Waiters < 0 {
		q.t.Fatalf("Inspect(%q) reports Waiters -1: the harness declares ClientsServedInOrder, which needs the driver's Inspector to count the clients waiting in the backend's queue", key)
	}
	return info
}

// queueBound is how long a client may take to reach the backend's queue:
// a few TTLs, on a loaded machine.
func (q *queueWatch) queueBound() time.Duration { return 4*q.e.ttl + q.e.slack }

// waitWaiters waits until at least n clients wait for key.
func (q *queueWatch) waitWaiters(key string, n int, what string) {
	waitFor(q.t, q.queueBound(), what, func() bool { return q.inspect(key).Waiters >= n })
}

// waitHeld waits until key is held.
func (q *queueWatch) waitHeld(key, what string) {
	waitFor(q.t, q.queueBound(), what, func() bool { return q.inspect(key).Held })
}

// orderWitness records the order in which the waiting clients are granted,
// each of which gives its grant back at once.
type orderWitness struct {
	mu     sync.Mutex
	order  []int    // the clients, in the order of their grants
	tokens []uint64 // their tokens, in the same order
	errs   []error
	wg     sync.WaitGroup
}

// start makes client i wait in acquire, within a bound of many TTLs, then
// record its grant and give it back.
func (w *orderWitness) start(t *T, e *env, i int, acquire func(context.Context) (dlock.Lease, error)) {
	bound := time.Duration(8*orderWaiters)*e.ttl + e.slack
	w.wg.Go(func() {
		ctx, cancel := contextWithTimeout(t, bound)
		defer cancel()
		l, err := acquire(ctx)
		if err != nil {
			w.fail(fmt.Errorf("client %d: got %v, want a grant within %v", i, err, bound))
			return
		}
		// Recorded before the grant is given back: the next grant cannot
		// come before it, so the record's order is the grants' order.
		w.mu.Lock()
		w.order = append(w.order, i)
		w.tokens = append(w.tokens, l.Token())
		w.mu.Unlock()
		if err := l.Unlock(t.Context()); err != nil {
			w.fail(fmt.Errorf("client %d: Unlock: %v", i, err))
		}
	})
}

func (w *orderWitness) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errs = append(w.errs, err)
}

// judge waits for every client, then checks that they were granted in the
// order they queued, with tokens rising from the first holder's.
func (w *orderWitness) judge(t *T, first uint64, what string) {
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := errors.Join(w.errs...); err != nil {
		t.Fatalf("not every waiting client got %s: %v", what, err)
	}
	want := make([]int, orderWaiters)
	for i := range want {
		want[i] = i
	}
	if !slices.Equal(w.order, want) {
		t.Errorf("waiting clients got %s in the order %v, want the order they queued in, %v: the backend must serve waiting clients first come, first served", what, w.order, want)
	}
	prev := first
	for turn, tok := range w.tokens {
		if tok != 0 && prev != 0 && tok <= prev {
			t.Errorf("grant %d of %s (client %d) has token %d after %d: tokens must rise", turn+1, what, w.order[turn], tok, prev)
		}
		prev = tok
	}
}
