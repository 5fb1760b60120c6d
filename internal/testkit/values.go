package testkit

import (
	"context"
	"sync"
	"testing"

	"github.com/dlock-go/dlock/driver"
)

// ValueWatch inspects one lock as fast as it can, in the background, and
// keeps every (value, token) pair it sees on a held lock: a driver's check
// that its Inspector never pairs one grant's value with another grant's
// token (driver.Capabilities.Values) while grants follow each other.
type ValueWatch struct {
	mu     sync.Mutex
	grants map[string]uint64 // value → the token its grant got
	seen   []driver.Info
	stop   chan struct{}
	done   chan error
}

// WatchValues starts inspecting with inspect until Check is called.
func WatchValues(inspect func(context.Context) (driver.Info, error)) *ValueWatch {
	w := &ValueWatch{grants: map[string]uint64{}, stop: make(chan struct{}), done: make(chan error, 1)}
	go func() {
		for {
			select {
			case <-w.stop:
				w.done <- nil
				return
			default:
			}
			info, err := inspect(context.Background())
			if err != nil {
				w.done <- err
				return
			}
			// Held with neither value nor token: a grant not settled
			// yet, which the contract allows.
			if info.Held && (info.Value != "" || info.Token != 0) {
				w.mu.Lock()
				w.seen = append(w.seen, info)
				w.mu.Unlock()
			}
		}
	}()
	return w
}

// Granted records that the grant with value got token.
func (w *ValueWatch) Granted(value string, token uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.grants[value] = token
}

// Check stops the inspections and fails tb unless every pair seen is a
// recorded grant's value with that grant's token, and at least one was seen.
func (w *ValueWatch) Check(tb testing.TB) {
	tb.Helper()
	close(w.stop)
	if err := <-w.done; err != nil {
		tb.Fatalf("Inspect: %v", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.seen) == 0 {
		tb.Fatal("the inspector never saw a hold with a value")
	}
	for _, s := range w.seen {
		if want, ok := w.grants[s.Value]; !ok || want != s.Token {
			tb.Fatalf("Inspect reported value %q with token %d; that value's grant got token %d (known: %v)", s.Value, s.Token, want, ok)
		}
	}
}
