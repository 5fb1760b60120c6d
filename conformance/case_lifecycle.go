package conformance

import (
	"context"
	"errors"
	"math"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
)

func testCancelledWait(t *T, e *env) {
	key := e.key("cancel")
	ma, mb, mc := e.mutex(t, e.client(t), key), e.mutex(t, e.client(t), key), e.mutex(t, e.client(t), key)
	la := lock(t, ma)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := mb.Lock(ctx); err != context.Canceled {
		t.Errorf("Lock with a cancelled context: got %v, want exactly context.Canceled", err)
	}
	if _, err := mb.TryLock(ctx); err != context.Canceled {
		t.Errorf("TryLock with a cancelled context: got %v, want exactly context.Canceled", err)
	}

	const wait = 100 * time.Millisecond
	ctx, cancel = context.WithTimeout(t.Context(), wait)
	start := time.Now()
	_, err := mb.Lock(ctx)
	cancel()
	if err != context.DeadlineExceeded {
		t.Errorf("Lock past its deadline: got %v, want exactly context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > wait+e.slack {
		t.Errorf("Lock returned %v after its deadline, want promptly", took-wait)
	}

	ctx, cancel = context.WithCancel(t.Context())
	timer := time.AfterFunc(wait, cancel)
	_, err = mb.Lock(ctx)
	timer.Stop()
	if err != context.Canceled {
		t.Errorf("Lock cancelled while waiting: got %v, want exactly context.Canceled", err)
	}

	unlock(t, la)
	expectFree(t, mc, "cancelled waiters leave nothing behind")
}

func testFencingTokens(t *T, e *env) {
	key := e.key("fence")
	ma, mb := e.mutex(t, e.client(t), key), e.mutex(t, e.client(t), key)
	lapsing := e.mutex(t, e.client(t), key, dlock.WithoutRenewal())
	var tokens []uint64
	take := func(m dlock.Mutex, release bool) dlock.Lease {
		l := lock(t, m)
		tokens = append(tokens, l.Token())
		if release {
			unlock(t, l)
		}
		return l
	}
	take(ma, true) // then a release
	take(mb, true) // on another client
	l := take(lapsing, false)
	within(t, l.Done(), time.Until(l.Deadline())+e.slack, "the lapse of a lease without renewal")
	take(mb, true) // after an expiry
	take(ma, true) // and again
	if tokens[0] == 0 {
		t.Skipf("the driver issues no fencing tokens (Token is 0)")
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Errorf("fencing tokens %v: grant %d got %d after %d, want strictly increasing", tokens, i, tokens[i], tokens[i-1])
		}
	}
}

func testUseAfterClose(t *T, e *env) {
	key, other := e.key("close"), e.key("close-other")
	d := e.driver(t)
	c, err := dlock.New(d, dlock.WithTTL(e.ttl))
	if err != nil {
		t.Fatalf("dlock.New: %v", err)
	}
	m := e.mutex(t, c, key)
	blockedM := e.mutex(t, c, other)
	oc := e.client(t)
	mo, mother := e.mutex(t, oc, key), e.mutex(t, oc, other)
	held := lock(t, m)
	lo := lock(t, mother)

	blocked := make(chan error, 1)
	go func() {
		_, err := blockedM.Lock(t.Context())
		blocked <- err
	}()
	if err := c.Close(t.Context()); err != nil {
		t.Errorf("Close: %v", err)
	}
	select {
	case err := <-blocked:
		if !errors.Is(err, dlock.ErrClosed) {
			t.Errorf("a Lock blocked during Close: got %v, want ErrClosed", err)
		}
	case <-time.After(e.slack):
		t.Errorf("a Lock blocked during Close did not return within %v", e.slack)
	}
	within(t, held.Done(), e.slack, "a held lease ending at Close")
	if err := held.Err(); !errors.Is(err, dlock.ErrClosed) {
		t.Errorf("Err of a lease ended by Close: got %v, want ErrClosed", err)
	}
	expectFree(t, mo, "Close released the lock, long before its TTL")
	for name, err := range map[string]error{
		"Unlock":      held.Unlock(t.Context()),
		"Extend":      held.Extend(t.Context()),
		"Lock":        errOf(m.Lock(t.Context())),
		"TryLock":     errOf(m.TryLock(t.Context())),
		"Mutex":       errOf(c.Mutex(key)),
		"Close again": nilOr(c.Close(t.Context()), dlock.ErrClosed),
	} {
		if !errors.Is(err, dlock.ErrClosed) {
			t.Errorf("%s after Close: got %v, want ErrClosed", name, err)
		}
	}
	unlock(t, lo)
}

func errOf[V any](_ V, err error) error { return err }

// nilOr maps a nil error to want, for calls documented to return nil.
func nilOr(err, want error) error {
	if err == nil {
		return want
	}
	return err
}

// hostileKeys either work as distinct locks or are refused with
// ErrInvalidKey, on every driver.
var hostileKeys = []string{
	" ", "a b", "a\r\nflush_all", "a\r\n", "a\x00b", "a\x00", "\xff\xfe\xfd", "\x01\x02",
	"{a}", "{a", "a}", "{", "}", "{}", "/", "//", ".", "..", "/zookeeper", "a/../b", "a/b", "a:b",
	"*", "?", "%", "%00", "日本語", strings.Repeat("x", 1024), strings.Repeat("\xff", 1024),
}

func testBadKeys(t *T, e *env) {
	c := e.client(t)
	for _, k := range []string{"", strings.Repeat("k", 1025)} {
		if _, err := c.Mutex(k); !errors.Is(err, dlock.ErrInvalidKey) {
			t.Errorf("Mutex of a %d-byte key: got %v, want ErrInvalidKey", len(k), err)
		}
	}
	other := e.client(t)
	var held []dlock.Lease
	for _, k := range hostileKeys {
		m, err := c.Mutex(k)
		if errors.Is(err, dlock.ErrInvalidKey) {
			continue
		}
		if err != nil {
			t.Errorf("Mutex(%q): got %v, want a mutex or ErrInvalidKey", k, err)
			continue
		}
		ctx, cancel := contextWithTimeout(t, e.ttl+e.slack) // a previous run may hold it
		l, err := m.Lock(ctx)
		cancel()
		if err != nil {
			t.Errorf("Lock(%q) while holding %d other hostile keys: %v (keys collided?)", k, len(held), err)
			continue
		}
		held = append(held, l)
		expectLocked(t, e.mutex(t, other, k), "the hostile key is held")
	}
	for _, l := range held {
		unlock(t, l)
	}
}

func testBadOptions(t *T, e *env) {
	d := e.driver(t)
	if _, err := dlock.New(d, dlock.WithTTL(0)); !errors.Is(err, dlock.ErrInvalidTTL) {
		t.Errorf("New with TTL 0: got %v, want ErrInvalidTTL", err)
	}
	c := e.client(t)
	key := e.key("options")
	for _, ttl := range []time.Duration{0, -time.Second, time.Nanosecond, 9 * time.Millisecond, 30*24*time.Hour + 1, math.MaxInt64} {
		if _, err := c.Mutex(key, dlock.WithTTL(ttl)); !errors.Is(err, dlock.ErrInvalidTTL) {
			t.Errorf("Mutex with TTL %v: got %v, want ErrInvalidTTL", ttl, err)
		}
	}
	for name, opt := range map[string]dlock.Option{
		"WithOwner(\"\")":       dlock.WithOwner(""),
		"WithPolling(0, 1s)":    dlock.WithPolling(0, time.Second),
		"WithPolling(1s, 1ms)":  dlock.WithPolling(time.Second, time.Millisecond),
		"WithOwner(1025 bytes)": dlock.WithOwner(strings.Repeat("o", 1025)),
	} {
		if _, err := c.Mutex(key, opt); !errors.Is(err, dlock.ErrInvalidOption) {
			t.Errorf("Mutex with %s: got %v, want ErrInvalidOption", name, err)
		}
	}
	if !e.caps.Reentrant {
		if _, err := c.Mutex(key, dlock.WithOwner("o")); !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("WithOwner on a driver without reentrancy: got %v, want errors.ErrUnsupported", err)
		}
	}
	if !e.caps.Shared {
		if _, err := c.RWMutex(key); !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("RWMutex on a driver without read-write locks: got %v, want errors.ErrUnsupported", err)
		}
	}
}
