package conformance

import (
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// testCapabilities checks the one value a driver declares: it is consistent
// (Capabilities.Check), the same on every call and on every client of the
// backend (the core reads it once, and the suite reads it from one client
// for all), and its TTL limits are the core's to enforce and the driver's
// to honour.
func testCapabilities(t *T, e *env) {
	d := e.driver(t)
	caps := d.Capabilities()
	if err := caps.Check(); err != nil {
		t.Errorf("Capabilities().Check(): %v", err)
	}
	for i := range 3 {
		if diff := capsDiff(caps, d.Capabilities(), true); diff != "" {
			t.Errorf("Capabilities() call #%d differs from the first: %s (the value must not change; keep the optional behaviours in the driver rather than making new ones per call)", i+2, diff)
		}
	}
	if diff := capsDiff(caps, e.driver(t).Capabilities(), false); diff != "" {
		t.Errorf("Capabilities() of another client of the same backend declare other things: %s", diff)
	}

	c := e.client(t)
	key := e.key("capabilities")
	if caps.MinTTL == 0 && caps.MaxTTL == 0 {
		t.Logf("the driver declares no TTL limits: the core's (10 ms to 30 days) apply")
	}
	if (caps.MinTTL > 0 && e.ttl < caps.MinTTL) || (caps.MaxTTL > 0 && e.ttl > caps.MaxTTL) {
		t.Errorf("the harness's TTL %v is outside the driver's declared %v to %v", e.ttl, caps.MinTTL, caps.MaxTTL)
	}
	// Just outside a declared limit that narrows the core's: refused by the
	// core, before any request.
	var outside []time.Duration
	if caps.MinTTL > 10*time.Millisecond {
		outside = append(outside, caps.MinTTL-time.Nanosecond)
	}
	if caps.MaxTTL > 0 && caps.MaxTTL < 30*24*time.Hour {
		outside = append(outside, caps.MaxTTL+time.Nanosecond)
	}
	for _, ttl := range outside {
		if _, err := c.Mutex(key, dlock.WithTTL(ttl)); !errors.Is(err, dlock.ErrInvalidTTL) {
			t.Errorf("Mutex with TTL %v, outside the declared %v to %v: got %v, want ErrInvalidTTL", ttl, caps.MinTTL, caps.MaxTTL, err)
		}
	}
	// At a declared limit: accepted by the core, and honoured by the
	// backend.
	var inside []time.Duration
	if caps.MinTTL > 0 {
		inside = append(inside, max(caps.MinTTL, 10*time.Millisecond))
	}
	if caps.MaxTTL > 0 {
		inside = append(inside, min(caps.MaxTTL, 30*24*time.Hour))
	}
	for _, ttl := range inside {
		m, err := c.Mutex(key, dlock.WithTTL(ttl))
		if err != nil {
			t.Errorf("Mutex with TTL %v, inside the declared %v to %v: %v", ttl, caps.MinTTL, caps.MaxTTL, err)
			continue
		}
		ctx, cancel := contextWithTimeout(t, e.ttl+e.slack)
		l, err := m.Lock(ctx)
		cancel()
		if err != nil {
			t.Errorf("Lock with TTL %v, inside the declared %v to %v: %v", ttl, caps.MinTTL, caps.MaxTTL, err)
			continue
		}
		// A short TTL may have run out under load: the grant is what counts.
		if err := l.Unlock(t.Context()); err != nil && !errors.Is(err, dlock.ErrLockLost) {
			t.Errorf("Unlock of the lock with TTL %v: %v", ttl, err)
		}
	}
}

// capsDiff describes how b differs from a, or returns "". The facts must be
// equal, and the optional behaviours of one dynamic type, or both nil;
// within one client (same), the same behaviours (see sameBehaviour), and
// CheckKey the same function.
func capsDiff(a, b driver.Capabilities, same bool) string {
	var diffs []string
	add := func(field string, x, y any) {
		diffs = append(diffs, fmt.Sprintf("%s %v, then %v", field, x, y))
	}
	// The facts are of comparable types, so that != on the interfaces
	// compares their values; the behaviours are interfaces.
	for _, f := range []struct {
		name      string
		x, y      any
		behaviour bool
	}{
		{"Shared", a.Shared, b.Shared, false},
		{"Reentrant", a.Reentrant, b.Reentrant, false},
		{"Blocking", a.Blocking, b.Blocking, false},
		{"TokenBlock", a.TokenBlock, b.TokenBlock, false},
		{"MinTTL", a.MinTTL, b.MinTTL, false},
		{"MaxTTL", a.MaxTTL, b.MaxTTL, false},
		{"TTLReason", a.TTLReason, b.TTLReason, false},
		{"Notifier", a.Notifier, b.Notifier, true},
		{"BatchExtender", a.BatchExtender, b.BatchExtender, true},
		{"Transferer", a.Transferer, b.Transferer, true},
		{"Inspector", a.Inspector, b.Inspector, true},
	} {
		switch {
		case !f.behaviour:
			if f.x != f.y {
				add(f.name, f.x, f.y)
			}
		case same && !sameBehaviour(f.x, f.y), !same && reflect.TypeOf(f.x) != reflect.TypeOf(f.y):
			add(f.name, fmt.Sprintf("%T(%p)", f.x, f.x), fmt.Sprintf("%T(%p)", f.y, f.y))
		}
	}
	if (a.CheckKey == nil) != (b.CheckKey == nil) ||
		(same && a.CheckKey != nil && reflect.ValueOf(a.CheckKey).Pointer() != reflect.ValueOf(b.CheckKey).Pointer()) {
		add("CheckKey", describeFunc(a.CheckKey), describeFunc(b.CheckKey))
	}
	if len(diffs) == 0 {
		return ""
	}
	return fmt.Sprint(diffs)
}

func describeFunc(f func(string) error) string {
	if f == nil {
		return "nil"
	}
	return fmt.Sprintf("func at %#x", reflect.ValueOf(f).Pointer())
}

// sameBehaviour reports whether two values of an optional behaviour's field
// may be the same: both nil, or of one dynamic type and equal, or pointers
// to equal values (a small wrapper made anew around the same driver). Values
// that Go cannot compare (a struct with a func field) count as the same
// when their types are: only a difference that shows is reported.
func sameBehaviour(x, y any) bool {
	if x == nil || y == nil {
		return x == nil && y == nil
	}
	if reflect.TypeOf(x) != reflect.TypeOf(y) {
		return false
	}
	if eq, ok := equal(x, y); !ok || eq {
		return true
	}
	vx, vy := reflect.ValueOf(x), reflect.ValueOf(y)
	if vx.Kind() != reflect.Pointer || vx.IsNil() || vy.IsNil() {
		return false
	}
	eq, ok := equal(vx.Elem().Interface(), vy.Elem().Interface())
	return !ok || eq
}

// equal is x == y, and false for ok when Go cannot compare them.
func equal(x, y any) (eq, ok bool) {
	defer func() {
		if recover() != nil {
			eq, ok = false, false
		}
	}()
	return x == y, true
}
