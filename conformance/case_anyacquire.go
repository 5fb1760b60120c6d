package conformance

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlock-go/dlock/driver"
)

// testAnyAcquire checks the contract of the driver's AnyAcquirer on the
// driver directly. A semaphore takes its permits through it, where a mistake
// would grant a permit that a plain Acquire holds, take two permits at once,
// leave one behind, or issue a token out of the permit's sequence.
func testAnyAcquire(t *T, e *env) {
	d := e.driver(t)
	aa := d.Capabilities().AnyAcquirer
	if aa == nil {
		t.Skipf("the driver declares no AnyAcquirer")
	}
	other := e.driver(t)
	ctx := t.Context()
	keys := make([]string, 4)
	for i := range keys {
		keys[i] = e.key(fmt.Sprintf("any-%d", i))
	}
	requests := func() []driver.Request {
		reqs := make([]driver.Request, len(keys))
		for i, k := range keys {
			reqs[i] = e.request(k, e.ttl)
		}
		return reqs
	}
	// Key 2 has been granted once before, plainly: its grant through
	// AcquireAny continues that key's token sequence.
	before := e.acquire(t, other, keys[2])
	if err := before.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	h0, h1 := e.acquire(t, other, keys[0]), e.acquire(t, other, keys[1])

	l, i, err := aa.AcquireAny(ctx, requests())
	if err != nil {
		t.Fatalf("AcquireAny with keys 2 and 3 free: %v", err)
	}
	if i == 0 || i == 1 {
		t.Fatalf("AcquireAny granted request %d, whose key another client holds", i)
	}
	if i != 2 {
		t.Errorf("AcquireAny granted request %d, want 2, the first free one", i)
	}
	if before.Token() != 0 && l.Token() <= before.Token() {
		t.Errorf("AcquireAny: token %d after %d was granted for the same key by Acquire, want a greater one", l.Token(), before.Token())
	}
	if v := l.Validity(); v <= 0 || v > e.ttl {
		t.Errorf("AcquireAny: validity %v, want within (0, %v]", v, e.ttl)
	}
	// The grant is the lock of its key: a plain Acquire is excluded by it.
	if w, err := other.Acquire(ctx, e.request(keys[i], e.ttl)); !errors.Is(err, driver.ErrLocked) {
		if err == nil {
			_ = w.Release(ctx)
		}
		t.Fatalf("Acquire of the key AcquireAny granted, by another client: got %v, want ErrLocked", err)
	}
	// It granted one lock only: the other free key is still free.
	rest := keys[5-i] // 3 when 2 was granted, 2 when 3 was
	h3, err := other.Acquire(ctx, e.request(rest, e.ttl))
	if err != nil {
		t.Fatalf("Acquire of %s, free before AcquireAny took another key: %v (AcquireAny took two locks?)", rest, err)
	}

	// Every key held: refused with ErrLocked, and nothing taken.
	refused, _, err := aa.AcquireAny(ctx, requests())
	if !errors.Is(err, driver.ErrLocked) {
		if err == nil {
			_ = refused.Release(ctx)
		}
		t.Fatalf("AcquireAny with every key held: got %v, want ErrLocked", err)
	}
	if le, ok := errors.AsType[*driver.LockedError](err); ok && le.RetryAfter > e.ttl {
		t.Errorf("AcquireAny with every key held: RetryAfter %v, longer than the holders' TTL %v", le.RetryAfter, e.ttl)
	}
	// A call whose context has ended leaves nothing behind either.
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if w, _, err := aa.AcquireAny(ended, requests()); err == nil {
		_ = w.Release(ctx)
		t.Errorf("AcquireAny with an ended context granted a lock")
	}

	if err := l.Extend(ctx, e.ttl); err != nil {
		t.Fatalf("Extend of AcquireAny's grant: %v", err)
	}
	for _, h := range []driver.Lease{h0, h1, h3} {
		if err := h.Release(ctx); err != nil {
			t.Fatalf("Release by the other client: %v", err)
		}
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release of AcquireAny's grant: %v", err)
	}
	if err := l.Release(ctx); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("second Release of AcquireAny's grant: got %v, want ErrNotHeld", err)
	}
	// Every key is free now: the refused calls took none.
	for j, k := range keys {
		h, err := other.Acquire(ctx, e.request(k, e.ttl))
		if err != nil {
			t.Fatalf("Acquire of %s once every holder released: %v (left behind by a refused AcquireAny?)", k, err)
		}
		if j == i && l.Token() != 0 && h.Token() <= l.Token() {
			t.Errorf("Acquire after AcquireAny's grant of %s: token %d after %d, want greater", k, h.Token(), l.Token())
		}
		_ = h.Release(ctx)
	}
}
