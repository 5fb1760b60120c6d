package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

// lostContext returns a context cancelled when l reports its loss, with the
// reason as its cause, as the core listens (Lease.OnLoss, called once per
// lease): at once when l was lost already.
func lostContext(l driver.Lease) context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	l.OnLoss(func(reason error) { cancel(reason) })
	return ctx
}

// lostWithin waits up to d for l's loss report and returns its cause.
func lostWithin(t *testing.T, l driver.Lease, d time.Duration, what string) error {
	t.Helper()
	lost := lostContext(l)
	select {
	case <-lost.Done():
		return context.Cause(lost)
	case <-time.After(d):
		t.Fatalf("%s: no loss reported within %v", what, d)
		return nil
	}
}

// An administrator ending the holder's backend frees the lock at once, and
// the holder (once watched, from its first heartbeat on) hears of it at
// once, not at its next heartbeat.
func TestTerminatedBackend(t *testing.T) {
	noLeaks(t)
	d1, d2 := newTestDriver(t), newTestDriver(t)
	admin := rawConn(t)
	key := testkit.Key(t)
	const ttl = time.Minute // no later heartbeat could be the one to notice
	l := mustTry(t, d1, testkit.Request(key, ttl))
	if err := l.Extend(ctxFor(t), ttl); err != nil {
		t.Fatalf("first heartbeat: %v", err)
	}
	start := time.Now()
	if err := terminate(ctxFor(t), admin, KeyID(key)); err != nil {
		t.Fatal(err)
	}
	cause := lostWithin(t, l, 5*time.Second, "after pg_terminate_backend")
	if !errors.Is(cause, errConnectionLost) || !isCode(cause, "57P01") {
		t.Errorf("loss cause %v, want the connection's end with the server's 57P01", cause)
	}
	t.Logf("loss reported %v after the termination started", time.Since(start).Round(time.Millisecond))
	l2 := mustTry(t, d2, testkit.Request(key, ttl)) // at once: no TTL to wait for
	if l2.Token() <= l.Token() {
		t.Errorf("token %d after %d, want more", l2.Token(), l.Token())
	}
	if err := l.Extend(ctxFor(t), ttl); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Extend of the terminated lease: got %v, want ErrNotHeld", err)
	}
	if err := l.Release(ctxFor(t)); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Release of the terminated lease: got %v, want ErrNotHeld", err)
	}
	expectLocked(t, d1, testkit.Request(key, ttl), "the stale Release must leave the new holder's lock alone")
	mustRelease(t, l2)
	mustRelease(t, mustTry(t, d1, testkit.Request(key, ttl))) // d1 still works
}

// The server ends an unrenewed lock's session by itself (the driver keeps no
// timer of its own for it on PostgreSQL 14 and later), so a holder process
// that froze loses its lock: a contender waiting in the queue gets it once
// the TTL has passed since the last heartbeat.
func TestServerSideExpiry(t *testing.T) {
	noLeaks(t)
	d1, d2 := newTestDriver(t), newTestDriver(t)
	key := testkit.Key(t)
	const ttl = time.Second
	l := mustTry(t, d1, testkit.Request(key, ttl)).(*lease)
	renewed := time.Now()
	if err := l.Extend(ctxFor(t), ttl); err != nil { // and then no more
		t.Fatalf("Extend: %v", err)
	}
	l.mu.Lock()
	timer := l.expiry
	l.mu.Unlock()
	if timer != nil {
		t.Fatal("the driver keeps an expiry timer although the server expires the session")
	}
	l2, err := d2.Acquire(ctxFor(t), testkit.Blocking(testkit.Request(key, ttl)))
	if err != nil {
		t.Fatalf("contender's Acquire: %v", err)
	}
	waited := time.Since(renewed)
	if waited < ttl {
		t.Errorf("the lock was free again %v after the last heartbeat started, before its TTL %v", waited, ttl)
	}
	if waited > ttl+2*time.Second {
		t.Errorf("the lock was free again only %v after the last heartbeat, want about its TTL %v", waited, ttl)
	}
	cause := lostWithin(t, l, 5*time.Second, "after the server ended the session")
	if !isCode(cause, "57P05") {
		t.Errorf("loss cause %v, want the server's idle-session timeout (57P05)", cause)
	}
	mustRelease(t, l2)
}

// Extend finds a lock that the session lost while staying alive, which only
// happens when something unlocks behind the driver's back on its session.
func TestHeartbeatFindsLockGone(t *testing.T) {
	d := newTestDriver(t)
	key := testkit.Key(t)
	l := mustTry(t, d, testkit.Request(key, 5*time.Second)).(*lease)
	s, err := l.begin(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.simple(ctxFor(t), "SELECT pg_advisory_unlock_all()")
	l.mu.Lock()
	l.finishLocked()
	l.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(ctxFor(t), 5*time.Second); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("Extend of a lease whose lock is gone: got %v, want ErrNotHeld", err)
	}
	if cause := lostWithin(t, l, time.Second, "after the heartbeat"); !errors.Is(cause, errNotHeldAnyMore) {
		t.Errorf("loss cause %v, want %v", cause, errNotHeldAnyMore)
	}
}

func TestServerRestart(t *testing.T) {
	noLeaks(t)
	server.NeedFaults(t)
	d1, d2 := newTestDriver(t), newTestDriver(t)
	key := testkit.Key(t)
	const ttl = time.Minute
	l := mustTry(t, d1, testkit.Request(key, ttl))
	if err := l.Extend(ctxFor(t), ttl); err != nil { // watched from now on
		t.Fatalf("Extend: %v", err)
	}
	mustRelease(t, mustTry(t, d2, testkit.Request(testkit.Key(t), ttl))) // d2 has an idle connection
	ctx := ctxFor(t)
	stopErr := server.Server.Stop(ctx)
	lost := lostContext(l)
	select {
	case <-lost.Done():
	case <-time.After(15 * time.Second):
	}
	if err := server.Server.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if stopErr != nil {
		t.Fatal(stopErr)
	}
	if lost.Err() == nil {
		t.Fatal("no loss reported while the server was stopped")
	}
	t.Logf("loss cause: %v", context.Cause(lost))
	// d2's idle connection died with the server: the driver finds out and
	// uses a new one.
	l2, err := d2.Acquire(ctxFor(t), testkit.Blocking(testkit.Request(key, ttl)))
	if err != nil {
		t.Fatalf("Acquire after the restart: %v", err)
	}
	if l2.Token() <= l.Token() {
		t.Errorf("token %d after the restart, want more than %d", l2.Token(), l.Token())
	}
	mustRelease(t, l2)
	if err := l.Release(ctxFor(t)); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Release of the lease lost in the restart: got %v, want ErrNotHeld", err)
	}
}

// A server paused beyond the heartbeat bound: the renewal (bounded by the
// validity deadline, as the core bounds it) fails, the loss is reported, and
// after the pause the lock is free again, at the latest by the server's
// expiry.
func TestServerPaused(t *testing.T) {
	noLeaks(t)
	server.NeedFaults(t)
	d1, d2 := newTestDriver(t), newTestDriver(t)
	key := testkit.Key(t)
	const ttl = time.Second
	l := mustTry(t, d1, testkit.Request(key, ttl))
	mustRelease(t, mustTry(t, d2, testkit.Request(testkit.Key(t), ttl))) // warm d2 before the pause
	ctx := ctxFor(t)
	if err := server.Server.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := server.Server.Resume(context.Background()); err != nil {
				t.Error(err)
			}
		}
	}
	defer resume()
	renewCtx, cancel := context.WithTimeout(ctx, ttl)
	err := l.Extend(renewCtx, ttl)
	cancel()
	if err == nil {
		t.Fatal("Extend succeeded against a paused server")
	}
	cause := lostWithin(t, l, time.Second, "after a failed heartbeat")
	t.Logf("Extend: %v; loss cause: %v", err, cause)
	time.Sleep(ttl) // the length of the fault
	resume()
	l2, err := d2.Acquire(ctxFor(t), testkit.Blocking(testkit.Request(key, ttl)))
	if err != nil {
		t.Fatalf("Acquire after the pause: %v", err)
	}
	mustRelease(t, l2)
}

// Where the server cannot end an unrenewed session (before PostgreSQL 14,
// simulated here by hiding the setting from the driver), the driver's own
// timer ends it.
func TestClientSideExpiry(t *testing.T) {
	noLeaks(t)
	d1, d2 := newTestDriver(t), newTestDriver(t)
	key := testkit.Key(t)
	const ttl = time.Second
	mustRelease(t, mustTry(t, d1, testkit.Request(testkit.Key(t), ttl)))
	s, err := d1.sessions.get(ctxFor(t), true)
	if err != nil {
		t.Fatal(err)
	}
	s.idle = "" // as on PostgreSQL 13
	d1.sessions.put(s)
	// The lease's validity, and the driver's expiry timer, count from the
	// start of the call, not from its return, which comes later on a loaded
	// machine: the lock may be free again a TTL after the call started.
	started := time.Now()
	l := mustTry(t, d1, testkit.Request(key, ttl)).(*lease)
	l.mu.Lock()
	timer := l.expiry
	l.mu.Unlock()
	if timer == nil {
		t.Fatal("no expiry timer where the server cannot expire the session")
	}
	l2, err := d2.Acquire(ctxFor(t), testkit.Blocking(testkit.Request(key, ttl)))
	if err != nil {
		t.Fatalf("contender's Acquire: %v", err)
	}
	if waited := time.Since(started); waited < ttl || waited > ttl+2*time.Second {
		t.Errorf("the lock was free again %v after the acquisition started, want about its TTL %v", waited, ttl)
	}
	if cause := lostWithin(t, l, 5*time.Second, "after the expiry"); !errors.Is(cause, errExpired) {
		t.Errorf("loss cause %v, want %v", cause, errExpired)
	}
	mustRelease(t, l2)
	if err := l.Release(ctxFor(t)); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Release of the expired lease: got %v, want ErrNotHeld", err)
	}
}

// Before its first heartbeat a lease is not watched: the heartbeat finds the
// session's end.
func TestTerminatedBeforeFirstHeartbeat(t *testing.T) {
	noLeaks(t)
	d := newTestDriver(t)
	admin := rawConn(t)
	key := testkit.Key(t)
	l := mustTry(t, d, testkit.Request(key, time.Minute))
	if err := terminate(ctxFor(t), admin, KeyID(key)); err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(ctxFor(t), time.Minute); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("heartbeat after the session ended: got %v, want ErrNotHeld", err)
	}
	if cause := lostWithin(t, l, time.Second, "after the heartbeat"); !isCode(cause, "57P01") {
		t.Errorf("loss cause %v, want the server's 57P01", cause)
	}
	mustRelease(t, mustTry(t, d, testkit.Request(key, time.Minute)))
}
