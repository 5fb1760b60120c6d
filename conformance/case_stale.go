package conformance

import (
	"errors"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// takeOver waits for d to acquire key, which happens once the backend has let
// the previous holder's lease expire.
func (e *env) takeOver(t *T, d driver.Driver, key string) driver.Lease {
	var l driver.Lease
	waitFor(t, 2*e.ttl+e.slack, "the stale lease to expire on the backend", func() bool {
		var err error
		l, err = d.Acquire(t.Context(), e.request(key, e.ttl))
		if err != nil && !errors.Is(err, driver.ErrLocked) {
			t.Fatalf("Acquire: %v", err)
		}
		return err == nil
	})
	return l
}

// expectIntact checks, through a third client, that the holder of lb still
// holds key.
func (e *env) expectIntact(t *T, probe driver.Driver, key string, lb driver.Lease, why string) {
	if l, err := probe.Acquire(t.Context(), e.request(key, e.ttl)); !errors.Is(err, driver.ErrLocked) {
		if err == nil {
			_ = l.Release(t.Context())
		}
		t.Fatalf("Acquire by a third client: got %v, want ErrLocked: %s", err, why)
	}
	if err := lb.Extend(t.Context(), e.ttl); err != nil {
		t.Fatalf("the new holder's Extend: %v: %s", err, why)
	}
}

func testStaleUnlock(t *T, e *env) {
	key := e.key("stale-unlock")
	da, db, dc := e.driver(t), e.driver(t), e.driver(t)
	la := e.acquire(t, da, key)
	lb := e.takeOver(t, db, key)
	if err := la.Release(t.Context()); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("stale holder's Release: got %v, want ErrNotHeld", err)
	}
	e.expectIntact(t, dc, key, lb, "a stale Release must not remove the new holder's lock")
	_ = lb.Release(t.Context())

	// The same through the core: Unlock of a lost lease reports the loss.
	key = e.key("stale-unlock-core")
	ma := e.mutex(t, e.client(t), key, dlock.WithoutRenewal())
	mb, mc := e.mutex(t, e.client(t), key), e.mutex(t, e.client(t), key)
	l := lock(t, ma)
	within(t, l.Done(), time.Until(l.Deadline())+e.slack, "the lost signal of a lease without renewal")
	lbc := lock(t, mb)
	if err := l.Unlock(t.Context()); !errors.Is(err, dlock.ErrLockLost) {
		t.Errorf("Unlock of a lost lease: got %v, want ErrLockLost", err)
	}
	expectLocked(t, mc, "the stale holder's Unlock must not release the new holder's lock", lbc)
	unlock(t, lbc)
}

func testStaleExtend(t *T, e *env) {
	key := e.key("stale-extend")
	da, db, dc := e.driver(t), e.driver(t), e.driver(t)

	// Renewal after expiry must not resurrect a free lock.
	la := e.acquire(t, da, key)
	lb := e.takeOver(t, db, key)
	if err := lb.Release(t.Context()); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := la.Extend(t.Context(), e.ttl); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Extend of an expired lease on a free lock: got %v, want ErrNotHeld", err)
	}
	lc, err := dc.Acquire(t.Context(), e.request(key, e.ttl))
	if err != nil {
		t.Fatalf("Acquire after a stale Extend: got %v, want the lock free (not resurrected)", err)
	}

	// Renewal after a takeover must not extend or steal the new holder's lock.
	if err := la.Extend(t.Context(), e.ttl); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Extend of an expired lease while another client holds the lock: got %v, want ErrNotHeld", err)
	}
	e.expectIntact(t, db, key, lc, "a stale Extend must change nothing")
	_ = lc.Release(t.Context())
}

// The lead times before expiry at which testReleaseRacingExpiry releases.
var raceLeads = []time.Duration{40 * time.Millisecond, 20 * time.Millisecond, 10 * time.Millisecond, 5 * time.Millisecond, 2 * time.Millisecond}

func testReleaseRacingExpiry(t *T, e *env) {
	da, db, dc := e.driver(t), e.driver(t), e.driver(t)
	for _, lead := range raceLeads {
		if lead > e.ttl/2 {
			continue
		}
		key := e.key("race")
		started := time.Now()
		la := e.acquire(t, da, key)
		// A contender polls hard, to take the lock the moment it is free.
		got := make(chan driver.Lease, 1)
		stop := make(chan struct{})
		go func() {
			for {
				l, err := db.Acquire(t.Context(), e.request(key, e.ttl))
				if err == nil {
					got <- l
					return
				}
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}
			}
		}()
		time.Sleep(time.Until(started.Add(e.ttl - lead))) // schedule the race
		err := la.Release(t.Context())
		if err != nil && !errors.Is(err, driver.ErrNotHeld) {
			close(stop)
			t.Fatalf("Release: %v", err)
		}
		var lb driver.Lease
		select {
		case lb = <-got:
		case <-time.After(2*e.ttl + e.slack):
			close(stop)
			t.Fatalf("the contender never got the lock (lead %v)", lead)
		}
		close(stop)
		e.expectIntact(t, dc, key, lb, "a release racing the expiry removed the next holder's lock (lead "+lead.String()+")")
		_ = lb.Release(t.Context())
	}
}

func testExpiryAfterHolderVanishes(t *T, e *env) {
	key := e.key("vanish")
	da := e.driver(t)
	ca, err := dlock.New(da, dlock.WithTTL(e.ttl))
	if err != nil {
		t.Fatalf("dlock.New: %v", err)
	}
	t.Cleanup(func() { _ = ca.Close(t.Context()) })
	la := lock(t, e.mutex(t, ca, key))
	acquired := time.Now()
	deadline := la.Deadline()

	_ = da.Close() // the holder vanishes: its connection ends, nothing is released

	mb := e.mutex(t, e.client(t), key)
	lb := lockWithin(t, mb, time.Until(acquired.Add(e.ttl+e.slack)), "Lock after the holder vanished")
	select {
	case <-la.Done():
	default:
		if time.Now().Before(deadline) {
			t.Errorf("the lock was granted again before the vanished holder's validity deadline, and the holder was not told")
		}
	}
	within(t, la.Done(), time.Until(deadline)+e.slack, "the vanished holder's lost signal")
	unlock(t, lb)
}
