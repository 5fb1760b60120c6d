package hazelcast

// Tests of the hold counting of lease.go and acquire.go against the test
// cluster: what the member holds, for whom and how often, after each step,
// and what is left when an answer is lost (see recorder).

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

func TestGrantHoldsTwiceWithOwnLockOwner(t *testing.T) {
	testkit.NoLeaks(t)
	d := newMemberDriver(t, "")
	key := testkit.Key(t)

	l := d.acquire(t, key)
	if l.Token() == 0 {
		t.Error("Token() = 0, want a fencing token")
	}
	if v := l.Validity(); v < validFor(testTTL) || v > validFor(testTTL)+time.Second {
		t.Errorf("Validity() = %v, want the TTL less the member's granularity, %v", v, validFor(testTTL))
	}
	if err := l.Release(ctxFor(t)); err != nil {
		t.Fatalf("Release: %v", err)
	}
	d.expectFree(t, key, "the lock is still held after Release")

	// A second acquisition, by the same Driver, has an owner of its own.
	l2 := d.acquire(t, key)
	if l2.owner == l.owner {
		t.Error("two acquisitions share a lock owner")
	}
	d.expectNextGrant(t, l, l2)
}

func TestAcquireHeldLeavesNothing(t *testing.T) {
	da, db := twoDrivers(t)
	key := testkit.Key(t)
	l := da.acquire(t, key)

	_, err := db.Acquire(ctxFor(t), testkit.Request(key, testTTL))
	if !errors.Is(err, driver.ErrLocked) {
		t.Fatalf("Acquire of a held lock: %v, want ErrLocked", err)
	}
	// The fencing counter is read beside the tryLock, in either order.
	if ops, _ := db.rec.ops(0); len(ops) != 2 || !slices.Contains(ops, "tryLock") || !slices.Contains(ops, "fence") {
		t.Errorf("a refused Acquire made calls %v, want a tryLock and a read of the counter", ops)
	}
	if n := da.holds(t, l); n != baseHolds {
		t.Errorf("the holder's lock changed: held %d times by it", n)
	}
}

func TestExtendKeepsTwoHolds(t *testing.T) {
	d, _, l := heldLock(t)
	_, before := d.rec.ops(0)

	if err := l.Extend(ctxFor(t), 2*testTTL); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if ops, _ := d.rec.ops(before); !slices.Equal(ops, []string{"tryLock", "unlock", "unlock", "tryLock"}) {
		t.Errorf("Extend made calls %v, want tryLock, unlock, unlock, tryLock", ops)
	}
	if v := l.Validity(); v != validFor(2*testTTL) {
		t.Errorf("Validity() after Extend = %v, want %v", v, validFor(2*testTTL))
	}
	if n := d.holds(t, l); n != baseHolds {
		t.Errorf("after Extend the member holds it %d times for the lease, want %d", n, baseHolds)
	}
}

// A lock that lapsed and that nobody took is granted afresh by a re-entry:
// Extend must find that out, say ErrNotHeld, and leave the lock free.
func TestExtendDoesNotResurrectALapsedLock(t *testing.T) {
	d, key, l := heldLock(t)

	d.lapse(t, key)
	if err := l.Extend(ctxFor(t), testTTL); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("Extend of a lapsed lock: %v, want ErrNotHeld", err)
	}
	d.expectFree(t, key, "Extend of a lapsed lock left it held, want it free")
	if err := l.Extend(ctxFor(t), testTTL); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("second Extend: %v, want ErrNotHeld", err)
	}
	if err := l.Release(ctxFor(t)); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Release after a refused Extend: %v, want ErrNotHeld", err)
	}
}

func TestStaleLeaseNeverTouchesTheNextHolder(t *testing.T) {
	d, key, l := heldLock(t)

	d.lapse(t, key)
	next := d.stranger(t, key, testTTL)
	_, before := d.rec.ops(0)
	if err := l.Extend(ctxFor(t), testTTL); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("stale Extend: %v, want ErrNotHeld", err)
	}
	if ops, _ := d.rec.ops(before); !slices.Equal(ops, []string{"tryLock"}) {
		t.Errorf("a stale Extend made calls %v, want one refused tryLock", ops)
	}
	if err := l.Release(ctxFor(t)); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("stale Release: %v, want ErrNotHeld", err)
	}
	if !d.heldOnceBy(t, next, key) {
		t.Fatal("the next holder's lock changed")
	}

	// The same when the stale lease never tried to extend first.
	key2 := testkit.Key(t)
	l2 := d.acquire(t, key2)
	d.lapse(t, key2)
	next2 := d.stranger(t, key2, testTTL)
	if err := l2.Release(ctxFor(t)); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("stale Release: %v, want ErrNotHeld", err)
	}
	if !d.heldOnceBy(t, next2, key2) {
		t.Fatal("the next holder's lock changed")
	}
}

func TestDoubleRelease(t *testing.T) {
	d, key, l := heldLock(t)
	if err := l.Release(ctxFor(t)); err != nil {
		t.Fatalf("Release: %v", err)
	}
	next := d.acquire(t, key)
	_, before := d.rec.ops(0)
	if err := l.Release(ctxFor(t)); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("second Release: %v, want ErrNotHeld", err)
	}
	if ops, _ := d.rec.ops(before); len(ops) != 0 {
		t.Errorf("a second Release made calls %v, want none", ops)
	}
	if err := l.Extend(ctxFor(t), testTTL); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Extend after Release: %v, want ErrNotHeld", err)
	}
	if n := d.holds(t, next); n != baseHolds {
		t.Errorf("the next holder's lock changed: held %d times by it", n)
	}
}

// errLostAnswer stands for a call that was applied but whose answer never
// came (a connection that broke after sending).
var errLostAnswer = errors.New("test: the answer was lost")

// loseNth makes the n-th call (from 1) of op after this point lose its
// answer.
func loseNth(r *recorder, op string, n int) {
	seen := 0
	r.setAfter(func(c call) error {
		if c.op == op {
			if seen++; seen == n {
				return errLostAnswer
			}
		}
		return nil
	})
}

func TestExtendWithUnknownOutcome(t *testing.T) {
	for _, tc := range []struct {
		op string
		n  int
	}{{"tryLock", 1}, {"unlock", 1}, {"tryLock", 2}} {
		t.Run(tc.op+"#"+string(rune('0'+tc.n)), func(t *testing.T) {
			d, key, l := heldLock(t)

			loseNth(d.rec, tc.op, tc.n)
			err := l.Extend(ctxFor(t), testTTL)
			if err == nil || errors.Is(err, driver.ErrNotHeld) {
				t.Fatalf("Extend whose %s lost its answer: %v, want an error other than ErrNotHeld (the lock may be held)", tc.op, err)
			}
			d.rec.setAfter(nil)
			if err := l.Extend(ctxFor(t), testTTL); !errors.Is(err, driver.ErrNotHeld) {
				t.Errorf("Extend after an unknown outcome: %v, want ErrNotHeld (the count is unknown)", err)
			}
			if err := l.Release(ctxFor(t)); err != nil {
				t.Errorf("Release after an unknown outcome: %v", err)
			}
			d.expectFree(t, key, "the lock is still held after Release")
		})
	}
}

func TestReleaseWithUnknownOutcome(t *testing.T) {
	d, key, l := heldLock(t)
	loseNth(d.rec, "unlock", 1)
	if err := l.Release(ctxFor(t)); err == nil || errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("Release whose unlock lost its answer: %v, want an error", err)
	}
	d.rec.setAfter(nil)
	// The core calls Release once; a driver-level caller may call it again.
	// Both unlocks were applied, so the lock is free and the second Release
	// finds nothing of the lease's: ErrNotHeld.
	if err := l.Release(ctxFor(t)); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("second Release: %v, want ErrNotHeld", err)
	}
	d.expectFree(t, key, "the lock is still held")
}

// A failed read of the fencing counter beside the tryLock costs a second
// read after the grant, not the acquisition.
func TestEarlyFenceReadFailureIsHarmless(t *testing.T) {
	testkit.NoLeaks(t)
	d := newMemberDriver(t, "")
	loseNth(d.rec, "fence", 1)
	l := d.acquire(t, testkit.Key(t))
	if l.Token() == 0 {
		t.Error("no token")
	}
}

func TestAcquireWithUnknownOutcomeLeavesNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose func(r *recorder)
	}{
		{"grant", func(r *recorder) { loseNth(r, "tryLock", 1) }},
		{"second hold", func(r *recorder) { loseNth(r, "tryLock", 2) }},
		// Every read of the counter: the one beside the tryLock, then the
		// one after the grant.
		{"counter read", func(r *recorder) {
			r.setAfter(func(c call) error {
				if c.op == "fence" {
					return errLostAnswer
				}
				return nil
			})
		}},
		{"counter write", func(r *recorder) { loseNth(r, "initFence", 1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testkit.NoLeaks(t)
			d := newMemberDriver(t, "")
			key := testkit.Key(t)
			tc.lose(d.rec)
			if _, err := d.Acquire(ctxFor(t), testkit.Request(key, testTTL)); !errors.Is(err, errLostAnswer) {
				t.Fatalf("Acquire whose %s lost its answer: %v, want that error", tc.name, err)
			}
			d.expectFree(t, key, "a failed Acquire left the lock held")
		})
	}
}

// A grant whose second hold comes after the lease may have run out is not
// trusted: it is given back, and Acquire reports the lock taken.
func TestSlowGrantIsGivenBack(t *testing.T) {
	testkit.NoLeaks(t)
	d := newMemberDriver(t, "")
	clock := useTestClock(d.Driver)
	key := testkit.Key(t)
	d.rec.setAfter(func(c call) error {
		if c.op == "fence" {
			clock.advance(validFor(MinTTL)) // the fencing call is that slow
		}
		return nil
	})
	if _, err := d.Acquire(ctxFor(t), testkit.Request(key, MinTTL)); !errors.Is(err, driver.ErrLocked) {
		t.Fatalf("Acquire confirmed too late: %v, want ErrLocked", err)
	}
	d.expectFree(t, key, "a grant confirmed too late was left held")
}

// An Extend slower than the lease it set may have seen that lease run out
// between its calls: it reports the lease lost, and Release cleans up.
func TestSlowExtendIsALoss(t *testing.T) {
	d, key, l := heldLock(t)
	clock := useTestClock(d.Driver)
	d.rec.setAfter(func(c call) error {
		if c.op == "unlock" {
			clock.advance(validFor(testTTL) / 2)
		}
		return nil
	})
	if err := l.Extend(ctxFor(t), testTTL); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("Extend slower than its lease: %v, want ErrNotHeld", err)
	}
	d.rec.setAfter(nil)
	if err := l.Release(ctxFor(t)); err != nil {
		t.Errorf("Release: %v", err)
	}
	d.expectFree(t, key, "the lock is still held")
}

func TestUnsupportedRequests(t *testing.T) {
	testkit.NoLeaks(t)
	d := newMemberDriver(t, "")
	shared := testkit.Request(testkit.Key(t), testTTL)
	shared.Mode = driver.Shared
	reentrant := testkit.Request(testkit.Key(t), testTTL)
	reentrant.Owner = "o"
	for name, req := range map[string]driver.Request{"shared": shared, "reentrant": reentrant} {
		if _, err := d.Acquire(ctxFor(t), req); !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("Acquire %s: %v, want errors.ErrUnsupported", name, err)
		}
		if _, err := d.Acquire(ctxFor(t), testkit.Blocking(req)); !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("blocking Acquire %s: %v, want errors.ErrUnsupported", name, err)
		}
	}
	if ops, _ := d.rec.ops(0); len(ops) != 0 {
		t.Errorf("refused requests made calls %v", ops)
	}
	if err := checkTTL(MinTTL - time.Millisecond); err == nil {
		t.Errorf("checkTTL(%v) = nil, want an error", MinTTL-time.Millisecond)
	}
	if err := checkTTL(MinTTL); err != nil {
		t.Errorf("checkTTL(%v) = %v", MinTTL, err)
	}
	if _, err := d.Acquire(ctxFor(t), testkit.Request(testkit.Key(t), time.Second)); err == nil {
		t.Error("Acquire with a TTL below MinTTL succeeded")
	}
	caps := d.Capabilities()
	if caps.Shared || caps.Reentrant {
		t.Errorf("Capabilities() = %+v, want neither Shared nor Reentrant", caps)
	}
	if !caps.Blocking || caps.BatchExtender == nil || caps.Inspector == nil || caps.MinTTL != MinTTL || caps.MaxTTL != 0 || !strings.Contains(caps.TTLReason, "whole seconds") {
		t.Errorf("Capabilities() = %+v, want Blocking, BatchExtender, Inspector and MinTTL %v with its reason", caps, MinTTL)
	}
	// No Values: see Inspection in the package documentation.
	if caps.Notifier != nil || caps.Transferer != nil || caps.TokenBlock > 1 || caps.CheckKey != nil || caps.Values {
		t.Errorf("Capabilities() = %+v, want no Notifier, Transferer, TokenBlock, CheckKey or Values", caps)
	}
	if err := caps.Check(); err != nil {
		t.Error(err)
	}
}

func TestExtendBatch(t *testing.T) {
	testkit.NoLeaks(t)
	d := newMemberDriver(t, "")
	var leases []driver.Lease
	var ttls []time.Duration
	var keys []string
	for range 5 {
		key := testkit.Key(t)
		keys = append(keys, key)
		leases = append(leases, d.acquire(t, key))
		ttls = append(ttls, testTTL)
	}
	d.lapse(t, keys[2])
	errs := d.ExtendBatch(ctxFor(t), leases, ttls)
	for i, err := range errs {
		if want := i == 2; errors.Is(err, driver.ErrNotHeld) != want || (!want && err != nil) {
			t.Errorf("lease %d: %v (lapsed: %t)", i, err, want)
		}
	}
	if errs := d.ExtendBatch(ctxFor(t), leases, ttls[:1]); len(errs) != len(leases) || errs[0] == nil {
		t.Errorf("ExtendBatch with too few TTLs: %v, want one error per lease", errs)
	}
}
