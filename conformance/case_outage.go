package conformance

import (
	"context"
	"time"

	"github.com/dlock-go/dlock"
)

// testLockWaitsThroughRestart checks that a waiting Lock rides out an
// outage: while it waits, the backend restarts (its connections break, its
// requests fail or are refused), and later it is paused; each time the Lock
// is granted once the backend is back and the lock is free, with no error,
// inside its context.
func testLockWaitsThroughRestart(t *T, e *env) {
	f := e.h.Faults
	if f == nil || f.Restart == nil {
		t.Skipf("the harness has no Restart hook")
	}
	key := e.key("outage")
	ca, cb := e.client(t), e.client(t)
	ma, mb := e.mutex(t, ca, key), e.mutex(t, cb, key)

	// A restart while B waits for A's lock.
	la := lock(t, ma)
	waiting := startLock(t, mb)
	waiting.queued(t, e, cb, "B", la)
	if err := f.Restart(t.Context()); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	// A lets go (its lock may be gone with the restart, or kept; its
	// Unlock may fail on a connection the restart broke, and the lock then
	// ends by its TTL).
	releaseBestEffort(t, e, la)
	// The bound allows for A's client reconnecting and its driver
	// finishing a release the restart cut off, on a loaded machine.
	lb := waiting.await(t, 4*e.ttl+4*e.slack, "B's Lock after the restart")

	if f.Pause == nil || f.Resume == nil {
		unlock(t, lb)
		return
	}

	// A pause while C waits for B's lock: B's lease is lost by its
	// deadline, B lets go after the pause, and C gets the lock.
	cc := e.client(t)
	mc := e.mutex(t, cc, key)
	waiting = startLock(t, mc)
	waiting.queued(t, e, cc, "C", lb)
	resume := pause(t, f)
	time.Sleep(e.ttl * 3 / 2) // the length of the fault
	resume()
	releaseBestEffort(t, e, lb)
	lc := waiting.await(t, 4*e.ttl+4*e.slack, "C's Lock after the pause")
	unlock(t, lc)
}

// pendingLock is a Lock call under way in a goroutine of its own.
type pendingLock struct {
	key   string
	done  chan lockOutcome
	taken *bool // await took the outcome
}

type lockOutcome struct {
	l   dlock.Lease
	err error
}

// startLock starts m.Lock under a context of the case's: the bound of its
// wait. If the case ends first, its cleanup ends the Lock and gives back
// what it got.
func startLock(t *T, m dlock.Mutex) pendingLock {
	ctx, cancel := context.WithCancel(t.Context())
	p := pendingLock{key: m.Key(), done: make(chan lockOutcome, 1), taken: new(bool)}
	go func() {
		l, err := m.Lock(ctx)
		p.done <- lockOutcome{l, err}
	}()
	t.Cleanup(func() {
		cancel()
		if !*p.taken {
			if o := <-p.done; o.err == nil {
				_ = o.l.Unlock(context.Background())
			}
		}
	})
	return p
}

// queued waits until the Lock waits in c's queue. A Lock that returned
// instead fails the case with what it returned: it was asked while holder
// held the lock, so a grant is a second holder (unless holder's lease was
// lost, which the message says), and an error is one the case does not
// expect.
func (p pendingLock) queued(t *T, e *env, c *dlock.Client, who string, holder dlock.Lease) {
	waitFor(t, e.ttl+e.slack, who+" waiting for the lock", func() bool {
		select {
		case o := <-p.done:
			*p.taken = true
			if o.err == nil {
				_ = o.l.Unlock(context.Background())
				t.Fatalf("%s's Lock (%q) was granted at once while another client held the lock (its lease: %v)", who, p.key, holder.Err())
			}
			t.Fatalf("%s's Lock (%q) returned before waiting: %v", who, p.key, o.err)
		default:
		}
		return c.Waiters(p.key) == 1
	})
}

// await takes the Lock's outcome, which must be a lease, within d.
func (p pendingLock) await(t *T, d time.Duration, what string) dlock.Lease {
	select {
	case o := <-p.done:
		*p.taken = true
		if o.err != nil {
			t.Fatalf("%s (%q): %v; want the lock, with no error", what, p.key, o.err)
		}
		return o.l
	case <-time.After(d):
		t.Fatalf("%s (%q): not granted within %v", what, p.key, d)
	case <-t.Context().Done():
		t.Fatalf("%s (%q): case ran out of time", what, p.key)
	}
	return nil
}

// releaseBestEffort unlocks l, if it is still there, bounded by a TTL: the
// result does not matter to the case (it is logged), only that the lock is
// let go.
func releaseBestEffort(t *T, e *env, l dlock.Lease) {
	ctx, cancel := context.WithTimeout(t.Context(), e.ttl+e.slack)
	defer cancel()
	if err := l.Unlock(ctx); err != nil {
		t.Logf("Unlock(%q) after the fault: %v (the lock ends by its TTL, session or connection)", l.Key(), err)
	}
}
