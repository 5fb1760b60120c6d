package hazelcast

// Tests of the server-side waiting of acquire.go against the test cluster.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

func TestAcquireWaitsOnTheMember(t *testing.T) {
	da, db := twoDrivers(t)
	key := testkit.Key(t)
	la := da.acquire(t, key)

	type result struct {
		l   driver.Lease
		err error
	}
	got := make(chan result, 1)
	started := time.Now()
	go func() {
		l, err := db.Acquire(ctxFor(t), testkit.Blocking(testkit.Request(key, testTTL)))
		got <- result{l, err}
	}()
	c := queued(t, db.rec)
	if c.owner == nil || c.owner == la.owner {
		t.Fatalf("the waiting call's owner is %v, want one of its own", c.owner)
	}
	if c.wait <= 0 || c.wait > DefaultWaitSlice {
		t.Errorf("the member was asked to wait %v, want at most the default slice %v", c.wait, DefaultWaitSlice)
	}
	if err := la.Release(ctxFor(t)); err != nil {
		t.Fatalf("Release: %v", err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("Acquire: %v", r.err)
	}
	lb := r.l.(*lease)
	if v := lb.Validity(); v < validFor(testTTL) || v > validFor(testTTL)+time.Since(started) {
		t.Errorf("Validity() = %v, want %v plus at most the %v Acquire took", v, validFor(testTTL), time.Since(started))
	}
	db.expectNextGrant(t, la, lb)
}

func TestWaitEndsAtTheCallersDeadline(t *testing.T) {
	da, db := twoDrivers(t, WithWaitSlice(time.Minute))
	key := testkit.Key(t)
	la := da.acquire(t, key)

	const wait = 100 * time.Millisecond
	ctx, cancel := context.WithTimeout(ctxFor(t), wait)
	defer cancel()
	start := time.Now()
	if _, err := db.Acquire(ctx, testkit.Blocking(testkit.Request(key, testTTL))); err != context.DeadlineExceeded {
		t.Fatalf("Acquire past its deadline: %v, want exactly context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > wait+2*time.Second {
		t.Errorf("Acquire returned %v after its deadline", took-wait)
	}
	if w := db.rec.lastWait(); w <= 0 || w > wait+time.Millisecond {
		t.Errorf("the member was asked to wait %v, want at most the %v left of the context", w, wait)
	}
	db.rec.settle()
	if n := da.holds(t, la); n != baseHolds {
		t.Fatalf("the holder's lock changed: held %d times by it", n)
	}
}

func TestWaitSlices(t *testing.T) {
	testkit.NoLeaks(t)
	d := newMemberDriver(t, "", WithWaitSlice(time.Minute))
	lease := leaseTime(testTTL)

	s, err := d.slice(context.Background(), lease)
	if err != nil || s != validFor(lease)/2 {
		t.Errorf("slice without a deadline = %v, %v, want half of what the lease surely lasts, %v", s, err, validFor(lease)/2)
	}
	d2 := newMemberDriver(t, "")
	if s, err := d2.slice(context.Background(), lease); err != nil || s != DefaultWaitSlice {
		t.Errorf("default slice = %v, %v, want %v", s, err, DefaultWaitSlice)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if s, err := d.slice(ctx, lease); err != nil || s <= 0 || s > 30*time.Millisecond || s%time.Millisecond != 0 {
		t.Errorf("slice with 30ms left = %v, %v, want whole milliseconds up to 30ms", s, err)
	}
	<-ctx.Done()
	if _, err := d.slice(ctx, lease); err != context.DeadlineExceeded {
		t.Errorf("slice past the deadline: %v, want context.DeadlineExceeded", err)
	}
}

func TestWaitingHeadSurvivesManySlices(t *testing.T) {
	da, db := twoDrivers(t, WithWaitSlice(5*time.Millisecond))
	key := testkit.Key(t)
	la := da.acquire(t, key)

	got := make(chan error, 1)
	go func() {
		l, err := db.Acquire(ctxFor(t), testkit.Blocking(testkit.Request(key, testTTL)))
		if err == nil {
			err = l.Release(ctxFor(t))
		}
		got <- err
	}()
	for range 3 { // the waiter asks again after each slice
		queued(t, db.rec)
	}
	if err := la.Release(ctxFor(t)); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := <-got; err != nil {
		t.Fatalf("Acquire after several slices: %v", err)
	}
	db.rec.settle()
	da.expectFree(t, key, "the lock is still held")
}

func TestAcquireAfterClose(t *testing.T) {
	testkit.NoLeaks(t)
	d := newMemberDriver(t, "")
	l := d.acquire(t, testkit.Key(t))
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	for name, err := range map[string]error{
		"Acquire":          errOf(d.Acquire(ctxFor(t), testkit.Request(testkit.Key(t), testTTL))),
		"blocking Acquire": errOf(d.Acquire(ctxFor(t), testkit.Blocking(testkit.Request(testkit.Key(t), testTTL)))),
		"Extend":           l.Extend(ctxFor(t), testTTL),
		"Release":          l.Release(ctxFor(t)),
	} {
		if !errors.Is(err, driver.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

func errOf[V any](_ V, err error) error { return err }
