package conformance

import (
	"errors"

	"github.com/dlock-go/dlock/driver"
)

// testTransfer checks the contract of the driver's Transferer on the driver directly:
// the core uses it for in-process handoffs, where a mistake would hand one
// lock to two holders or reuse a fencing token.
func testTransfer(t *T, e *env) {
	d := e.driver(t)
	tr := d.Capabilities().Transferer
	if tr == nil {
		t.Skipf("the driver declares no Transferer")
	}
	other := e.driver(t)
	ctx := t.Context()
	key := e.key("transfer")
	a, err := d.Acquire(ctx, e.request(key, e.ttl))
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	b, err := tr.Transfer(ctx, a, e.request(key, e.ttl))
	if err != nil {
		t.Fatalf("Transfer of a held lock: %v", err)
	}
	if a.Token() != 0 && b.Token() <= a.Token() {
		t.Errorf("Transfer: token %d after %d, want a new, greater one", b.Token(), a.Token())
	}
	if v := b.Validity(); v <= 0 || v > e.ttl {
		t.Errorf("Transfer: validity %v, want within (0, %v]", v, e.ttl)
	}
	if _, err := other.Acquire(ctx, e.request(key, e.ttl)); !errors.Is(err, driver.ErrLocked) {
		t.Fatalf("Acquire by another client after a transfer: got %v, want ErrLocked", err)
	}

	// The former holder's lease is nobody's now: it neither releases,
	// extends nor transfers the lock again.
	if err := a.Release(ctx); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Release by the former holder: got %v, want ErrNotHeld", err)
	}
	if err := a.Extend(ctx, e.ttl); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Extend by the former holder: got %v, want ErrNotHeld", err)
	}
	stolen, err := tr.Transfer(ctx, a, e.request(key, e.ttl))
	if !errors.Is(err, driver.ErrNotHeld) {
		if err == nil {
			_ = stolen.Release(ctx)
		}
		t.Fatalf("Transfer by the former holder: got %v, want ErrNotHeld", err)
	}
	if err := b.Extend(ctx, e.ttl); err != nil {
		t.Fatalf("Extend by the new holder after a refused transfer: %v", err)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatalf("Release by the new holder: %v", err)
	}
	c, err := other.Acquire(ctx, e.request(key, e.ttl))
	if err != nil {
		t.Fatalf("Acquire after the new holder released: %v", err)
	}
	if b.Token() != 0 && c.Token() <= b.Token() {
		t.Errorf("token %d granted after %d, want greater", c.Token(), b.Token())
	}
	_ = c.Release(ctx)

	if !e.caps.Shared {
		return
	}
	// A read lock shared with another reader is not the transferer's to
	// give: refused, and nothing changes.
	skey := e.key("transfer-shared")
	shared := func(dr driver.Driver) driver.Lease {
		req := e.request(skey, e.ttl)
		req.Mode = driver.Shared
		l, err := dr.Acquire(ctx, req)
		if err != nil {
			t.Fatalf("Acquire(shared): %v", err)
		}
		return l
	}
	r1, r2 := shared(d), shared(other)
	if w, err := tr.Transfer(ctx, r1, e.request(skey, e.ttl)); !errors.Is(err, driver.ErrLocked) {
		if err == nil {
			_ = w.Release(ctx)
		}
		t.Fatalf("Transfer of a shared read lock: got %v, want ErrLocked", err)
	}
	if err := r1.Release(ctx); err != nil {
		t.Errorf("Release of the reader whose transfer was refused: %v", err)
	}
	if err := r2.Release(ctx); err != nil {
		t.Errorf("Release of the other reader: %v", err)
	}
}
