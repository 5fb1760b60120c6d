package postgres

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testkit"
)

// Many blocking acquisitions, cancelled at random moments while the lock
// passes between holders, so that some cancellations arrive just as the
// server grants the lock: none may leave a lock behind, the holders never
// overlap, and the waiters' connections survive their cancellations.
func TestCancelledWaitsRace(t *testing.T) {
	noLeaks(t)
	const waiters, rounds = 8, 40
	holder := newTestDriver(t)
	dw := newTestDriver(t, WithMaxConns(waiters))
	admin := rawConn(t)
	key := testkit.Key(t)
	const ttl = 10 * time.Second

	var inside atomic.Int32
	enter := func() {
		if n := inside.Add(1); n != 1 {
			t.Errorf("%d holders at once", n)
		}
	}
	leave := func() { inside.Add(-1) }
	pause := func(max time.Duration) { time.Sleep(rand.N(max)) } // random timing is the point here

	stop := make(chan struct{})
	var churn sync.WaitGroup
	churn.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			l, err := holder.Acquire(ctxFor(t), testkit.Blocking(testkit.Request(key, ttl)))
			if err != nil {
				t.Errorf("holder's Acquire: %v", err)
				return
			}
			enter()
			pause(2 * time.Millisecond)
			leave()
			if err := l.Release(ctxFor(t)); err != nil {
				t.Errorf("holder's Release: %v", err)
				return
			}
		}
	})

	// The waiters' connections are made first: the race of interest is a
	// wait's cancellation meeting a grant, not a cancelled connect.
	var warm sync.WaitGroup
	for range waiters {
		warm.Go(func() {
			l, err := dw.Acquire(ctxFor(t), testkit.Blocking(testkit.Request(testkit.Key(t), ttl)))
			if err != nil {
				t.Errorf("warm-up: %v", err)
				return
			}
			time.Sleep(100 * time.Millisecond) // keep it while the others make theirs
			_ = l.Release(ctxFor(t))
		})
	}
	warm.Wait()

	var cancelled, granted atomic.Int64
	var wg sync.WaitGroup
	for range waiters {
		wg.Go(func() {
			for range rounds {
				ctx, cancel := context.WithTimeout(context.Background(), rand.N(10*time.Millisecond))
				l, err := dw.Acquire(ctx, testkit.Blocking(testkit.Request(key, ttl)))
				cancel()
				switch {
				case err == nil:
					granted.Add(1)
					enter()
					leave()
					if err := l.Release(ctxFor(t)); err != nil {
						t.Errorf("waiter's Release: %v", err)
					}
				case errors.Is(err, context.DeadlineExceeded):
					cancelled.Add(1)
				default:
					t.Errorf("waiter's Acquire: got %v, want a lease or context.DeadlineExceeded", err)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	churn.Wait()
	t.Logf("%d waits cancelled (%d of them as the lock was granted), %d granted; %d connections made for them",
		cancelled.Load(), dw.racedGrants.Load(), granted.Load(), dw.sessions.dials.Load())

	if n := sessionsHolding(t, admin, KeyID(key)); n != 0 {
		t.Fatalf("%d sessions hold the key after every holder left: a cancelled wait leaked its grant", n)
	}
	mustRelease(t, mustTry(t, newTestDriver(t), testkit.Request(key, ttl)))
	// A cancelled wait keeps its connection: the waiters needed no more
	// connections than could wait at once (a few more, were one broken by
	// a cancel request that came too late, are tolerated).
	if dials := dw.sessions.dials.Load(); dials > 2*waiters {
		t.Errorf("%d connections made for %d waiters and %d cancellations: cancellation must not cost the connection", dials, waiters, cancelled.Load())
	}
	// And they still work.
	for range waiters {
		l, err := dw.Acquire(ctxFor(t), testkit.Blocking(testkit.Request(key, ttl)))
		if err != nil {
			t.Fatalf("Acquire after the race: %v", err)
		}
		mustRelease(t, l)
	}
	if cancelled.Load() == 0 {
		t.Error("no wait was cancelled: the test did not test anything")
	}
}

// An Acquire cancelled while it waits returns promptly with exactly ctx's
// error, keeps its connection, and leaves no queue entry behind.
func TestCancelledWaitKeepsConnection(t *testing.T) {
	noLeaks(t)
	d1, d2 := newTestDriver(t), newTestDriver(t)
	key := testkit.Key(t)
	l := mustTry(t, d1, testkit.Request(key, 10*time.Second))
	mustRelease(t, mustTry(t, d2, testkit.Request(testkit.Key(t), time.Second))) // d2 has one connection
	before := d2.sessions.dials.Load()
	for range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		start := time.Now()
		_, err := d2.Acquire(ctx, testkit.Blocking(testkit.Request(key, time.Second)))
		cancel()
		if err != context.DeadlineExceeded {
			t.Fatalf("cancelled Acquire: got %v, want exactly context.DeadlineExceeded", err)
		}
		if took := time.Since(start); took > time.Second {
			t.Fatalf("cancelled Acquire returned after %v", took)
		}
	}
	if dials := d2.sessions.dials.Load() - before; dials != 0 {
		t.Fatalf("%d connections made by 5 cancelled waits, want the one connection kept", dials)
	}
	mustRelease(t, l)
	mustRelease(t, mustTry(t, d2, testkit.Request(key, time.Second)))
}
