package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
	_ "github.com/dlock-go/dlock/drivers/memory" // registers mem://
)

// A lock taken, used with its fencing token, and released.
func Example() {
	ctx := context.Background()
	client, err := dlock.Open(ctx, "mem://example")
	if err != nil {
		panic(err)
	}
	defer client.Close(ctx)

	m, err := client.Mutex("reports/nightly", dlock.WithTTL(10*time.Second))
	if err != nil {
		panic(err)
	}
	lease, err := m.Lock(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("held, token", lease.Token())

	// Another owner cannot take it meanwhile.
	if _, err := m.TryLock(ctx); errors.Is(err, dlock.ErrLocked) {
		fmt.Println("busy:", errors.Is(err, dlock.ErrLocked))
	}

	if err := lease.Unlock(ctx); err != nil {
		panic(err)
	}
	fmt.Println("released:", lease.Err())
	// Output:
	// held, token 1
	// busy: true
	// released: dlock: lock not held
}

// Holding a lock while work runs, and stopping the work when the lock is
// lost: the lease's Done channel closes before its validity runs out.
func ExampleLease_Done() {
	ctx := context.Background()
	client, err := dlock.Open(ctx, "mem://example-done")
	if err != nil {
		panic(err)
	}
	defer client.Close(ctx)
	m, _ := client.Mutex("jobs/compact", dlock.WithTTL(time.Second))
	lease, err := m.Lock(ctx)
	if err != nil {
		panic(err)
	}
	defer lease.Unlock(ctx)

	for step := range 3 {
		select {
		case <-lease.Done():
			fmt.Println("stopping:", lease.Err())
			return
		default:
		}
		fmt.Println("step", step, "under token", lease.Token())
	}
	// Output:
	// step 0 under token 1
	// step 1 under token 1
	// step 2 under token 1
}

// Readers share a read-write lock; a writer waits for them.
func ExampleClient_RWMutex() {
	ctx := context.Background()
	client, err := dlock.Open(ctx, "mem://example-rw")
	if err != nil {
		panic(err)
	}
	defer client.Close(ctx)
	rw, err := client.RWMutex("catalog")
	if err != nil {
		panic(err) // errors.Is(err, errors.ErrUnsupported) on backends without read-write locks
	}
	r1, _ := rw.RLock(ctx)
	r2, _ := rw.TryRLock(ctx)
	_, err = rw.TryLock(ctx)
	fmt.Println("writer while two readers hold it:", errors.Is(err, dlock.ErrLocked))
	r1.Unlock(ctx)
	r2.Unlock(ctx)
	w, err := rw.TryLock(ctx)
	fmt.Println("writer after they left:", err == nil)
	w.Unlock(ctx)
	// Output:
	// writer while two readers hold it: true
	// writer after they left: true
}

// A reentrant lock: the same owner may take it again, and it is free once
// every entry has been unlocked.
func ExampleWithOwner() {
	ctx := context.Background()
	client, err := dlock.Open(ctx, "mem://example-reentrant")
	if err != nil {
		panic(err)
	}
	defer client.Close(ctx)
	m, err := client.Mutex("ledger", dlock.WithOwner("worker-7"))
	if err != nil {
		panic(err)
	}
	outer, _ := m.Lock(ctx)
	inner, err := m.TryLock(ctx) // re-entry: no wait, same token
	fmt.Println("re-entered:", err == nil, inner.Token() == outer.Token())
	inner.Unlock(ctx)
	outer.Unlock(ctx)
	// Output:
	// re-entered: true true
}

// A Lock that gives up when its context ends returns exactly ctx.Err().
func ExampleMutex_Lock_timeout() {
	ctx := context.Background()
	client, err := dlock.Open(ctx, "mem://example-timeout")
	if err != nil {
		panic(err)
	}
	defer client.Close(ctx)
	m, _ := client.Mutex("busy")
	held, _ := m.Lock(ctx)
	defer held.Unlock(ctx)

	waitCtx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = m.Lock(waitCtx)
	fmt.Println(err == context.DeadlineExceeded)
	// Output:
	// true
}

// At most two holders at once, across every client of the backend: each
// permit is a lease of its own, fenced per permit (its Key names it).
func ExampleClient_Semaphore() {
	ctx := context.Background()
	client, err := dlock.Open(ctx, "mem://example-semaphore")
	if err != nil {
		panic(err)
	}
	defer client.Close(ctx)

	s, err := client.Semaphore("api/quota", 2, dlock.WithTTL(10*time.Second))
	if err != nil {
		panic(err)
	}
	first, err := s.Acquire(ctx) // blocks while both permits are held
	if err != nil {
		panic(err)
	}
	second, err := s.TryAcquire(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("two permits, distinct:", first.Key() != second.Key())

	// A third holder is refused while both are held.
	_, err = s.TryAcquire(ctx)
	fmt.Println("third:", errors.Is(err, dlock.ErrLocked))

	// Giving one back lets the next one in, with a greater token for that
	// permit.
	_ = first.Unlock(ctx)
	third, err := s.Acquire(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("same permit again, later token:", third.Key() == first.Key() && third.Token() > first.Token())
	_ = second.Unlock(ctx)
	_ = third.Unlock(ctx)
	// Output:
	// two permits, distinct: true
	// third: true
	// same permit again, later token: true
}

func ExampleClient_Election() {
	ctx := context.Background()
	// Two candidates, as two processes would be: each with its own Client.
	clientA, err := dlock.Open(ctx, "mem://example-election")
	if err != nil {
		panic(err)
	}
	defer clientA.Close(ctx)
	clientB, err := dlock.Open(ctx, "mem://example-election")
	if err != nil {
		panic(err)
	}
	defer clientB.Close(ctx)

	a, err := clientA.Election("scheduler", dlock.WithTTL(10*time.Second))
	if err != nil {
		panic(err)
	}
	b, err := clientB.Election("scheduler", dlock.WithTTL(10*time.Second))
	if err != nil {
		panic(err)
	}

	termA, err := a.Campaign(ctx, "node-a:8080") // leads at once: nobody does
	if err != nil {
		panic(err)
	}
	// Anyone can ask who leads: the value and the term (the leader's token).
	now, err := b.Leader(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("leader:", now.Value, now.Term == termA.Token())

	// Observe reports each new leader; it starts with the current one.
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	changes, err := b.Observe(watchCtx)
	if err != nil {
		panic(err)
	}
	fmt.Println("observed:", (<-changes).Value)

	// B campaigns too, and waits while A leads.
	won := make(chan dlock.Lease)
	go func() {
		l, err := b.Campaign(ctx, "node-b:8080")
		if err != nil {
			panic(err)
		}
		won <- l
	}()
	_ = a.Resign(ctx) // or A's process ends: B leads within the TTL
	termB := <-won
	fmt.Println("B's term after A's:", termB.Token() > termA.Token())

	// The observer may see the leadership vacant in between, or not.
	for l := range changes {
		if l.Value != "" {
			fmt.Println("observed:", l.Value)
			break
		}
	}
	_ = b.Resign(ctx)
	// Output:
	// leader: node-a:8080 true
	// observed: node-a:8080
	// B's term after A's: true
	// observed: node-b:8080
}
