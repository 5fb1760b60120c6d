package postgres

import (
	"slices"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testkit"
)

// showIdle returns the idle_session_timeout of the Driver's one idle
// session, taken off the idle list and put back.
func showIdle(t *testing.T, d *Driver) (string, *session) {
	t.Helper()
	s, err := d.sessions.get(ctxFor(t), true)
	if err != nil {
		t.Fatal(err)
	}
	defer d.sessions.put(s)
	row, err := s.simple(ctxFor(t), "SHOW idle_session_timeout")
	if err != nil || len(row) != 1 {
		t.Fatalf("SHOW idle_session_timeout: %v %v", row, err)
	}
	return row[0], s
}

// A session released from a lease with a TTL of 2 s or more keeps the TTL
// as its idle_session_timeout (the next grant with that TTL then changes
// no setting), until it has been idle for half of it: the idle list then
// restores the session's own value, on the same connection, before the
// server would end it.
func TestIdleTimeoutKeptThenRestored(t *testing.T) {
	noLeaks(t)
	d := newTestDriver(t)
	key := testkit.Key(t)
	const ttl = 2 * time.Second
	mustRelease(t, mustTry(t, d, testkit.Request(key, ttl)))
	if got, _ := showIdle(t, d); got != "2s" {
		t.Fatalf("idle_session_timeout of the released session: %q, want the lease's 2s", got)
	}
	// The next grant finds the TTL in place and holds the lock.
	mustRelease(t, mustTry(t, d, testkit.Request(key, ttl)))
	released := time.Now()
	// Wait for the restore, without taking the session (which would
	// cancel it).
	deadline := released.Add(ttl + 10*time.Second)
	for {
		d.sessions.mu.Lock()
		restored := len(d.sessions.idle) == 1 && d.sessions.idle[0].applied == d.sessions.idle[0].idle && d.sessions.idle[0].restore == nil
		d.sessions.mu.Unlock()
		if restored {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session's own idle_session_timeout was not restored within %v of the release", time.Since(released))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if waited := time.Since(released); waited < ttl/2 {
		t.Errorf("restored %v after the release, before half the TTL", waited)
	}
	got, s := showIdle(t, d)
	if got != "0" {
		t.Fatalf("idle_session_timeout after the restore: %q, want the session's own 0", got)
	}
	if n := d.sessions.dials.Load(); n != 1 {
		t.Errorf("%d connections made, want 1: the restore must keep the connection", n)
	}
	if s.applied != s.idle {
		t.Errorf("the driver believes the session has %q, want %q", s.applied, s.idle)
	}
}

// A grant that leaves the session's idle_session_timeout alone, because the
// session has the TTL already, still has the server end the session when
// the lease is not renewed within the TTL: the server restarts the idle
// timer at the end of every statement. A contender waiting in the queue
// gets the lock once the TTL has passed since the grant, not before.
func TestServerExpiryWithKeptTimeout(t *testing.T) {
	noLeaks(t)
	d1, d2 := newTestDriver(t), newTestDriver(t)
	key := testkit.Key(t)
	const ttl = 2 * time.Second
	mustRelease(t, mustTry(t, d1, testkit.Request(key, ttl)))
	if got, _ := showIdle(t, d1); got != "2s" {
		t.Fatalf("idle_session_timeout of the released session: %q, want the lease's 2s", got)
	}
	granted := time.Now()
	l := mustTry(t, d1, testkit.Request(key, ttl)).(*lease) // on the same session, never renewed
	if n := d1.sessions.dials.Load(); n != 1 {
		t.Fatalf("%d connections made, want the one session reused", n)
	}
	l2, err := d2.Acquire(ctxFor(t), testkit.Blocking(testkit.Request(key, ttl)))
	if err != nil {
		t.Fatalf("contender's Acquire: %v", err)
	}
	waited := time.Since(granted)
	if waited < ttl {
		t.Errorf("the lock was free again %v after the grant started, before its TTL %v", waited, ttl)
	}
	if waited > ttl+3*time.Second {
		t.Errorf("the lock was free again only %v after the grant, want about its TTL %v", waited, ttl)
	}
	mustRelease(t, l2)
	_ = l.Release(ctxFor(t)) // its session is gone: ErrNotHeld
}

// A lease with a TTL under 2 s has its release restore the session's own
// idle_session_timeout at once (TestIdleSessionTimeoutRestored), and no
// restore is pending for the idle session.
func TestShortTTLRestoredOnRelease(t *testing.T) {
	d := newTestDriver(t)
	mustRelease(t, mustTry(t, d, testkit.Request(testkit.Key(t), time.Second)))
	d.sessions.mu.Lock()
	pending := slices.ContainsFunc(d.sessions.idle, func(s *session) bool { return s.restore != nil })
	d.sessions.mu.Unlock()
	if pending {
		t.Error("a restore is pending for a session released from a 1 s lease")
	}
}

// The driver's sessions run its prepared statements with their generic
// plan from the first execution on (plan_cache_mode).
func TestGenericPlans(t *testing.T) {
	d := newTestDriver(t)
	for range 3 {
		mustRelease(t, mustTry(t, d, testkit.Request(testkit.Key(t), 3*time.Second)))
	}
	s, err := d.sessions.get(ctxFor(t), true)
	if err != nil {
		t.Fatal(err)
	}
	defer d.sessions.put(s)
	row, err := s.simple(ctxFor(t), "SELECT coalesce(sum(custom_plans), -1)::text FROM pg_prepared_statements")
	if err != nil {
		t.Fatal(err)
	}
	if len(row) != 1 || row[0] != "0" {
		t.Errorf("custom plans of the driver's statements: %v, want 0", row)
	}
}
