package memcache

import (
	"context"
	"errors"
	"testing"

	"github.com/dlock-go/dlock/internal/testkit"
)

// Release's compare-and-delete runs on the caller's goroutine, bounded by
// the caller's ctx (asyncAfter). A ctx that ends while the md is on the
// wire cuts the round short: Release returns at once (exactly
// context.Canceled, or nil when the fallback finished first), the
// connection with the unread reply is dropped rather than pooled, the
// release by ID finishes in the background (Close waits for it), and the
// lock is free afterwards.
func TestMetaReleaseCancelledOnTheWire(t *testing.T) {
	server.Need(t)
	var w wire
	d := newMetaDriver(t, &w, server.URL)
	mc := newMC(t)
	key := testkit.Key(t)
	l := acquireLease(t, d, key, "")
	if l.lastWrite().c == nil {
		t.Fatal("the add left no connection and CAS unique: the meta release would not run")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.arm("md", func(*wireConn) { cancel() })
	if err := l.Release(ctx); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("Release cancelled mid-round: got %v, want context.Canceled or nil", err)
	} else if err != nil && err != context.Canceled {
		t.Fatalf("Release cancelled mid-round: got %v, want exactly context.Canceled", err)
	}
	if w.armed() {
		t.Fatal("the md was not sent")
	}
	// The Driver goes on working: the cut connection was not pooled with
	// its reply unread.
	l2 := acquireLease(t, d, key+"/next", "")
	if err := l2.Release(ctxFor(t)); err != nil {
		t.Fatalf("Release after a cut round: %v", err)
	}
	if err := d.Close(); err != nil { // waits for the background release
		t.Fatal(err)
	}
	if id := itemHolder(t, mc, key); id != "" {
		t.Fatalf("the lock item survived its Release, held by %q", id)
	}
	if id := itemHolder(t, mc, key+"/next"); id != "" {
		t.Fatalf("the second lock item survived its Release, held by %q", id)
	}
}
