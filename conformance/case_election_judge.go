package conformance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
)

// What the election cases share: how they make elections and campaign, and
// how they check what the backend reports of its leader.

// election makes the election key over c, or fails the case.
func (e *env) election(t *T, c *dlock.Client, key string, opts ...dlock.Option) dlock.Election {
	el, err := c.Election(key, opts...)
	if err != nil {
		t.Fatalf("Election(%q): %v", key, err)
	}
	return el
}

// needValues skips the case when the driver stores no value with a hold:
// Leader and Observe are then unsupported, by design.
func (e *env) needValues(t *T) {
	if !e.caps.Values {
		t.Skipf("the driver stores no value with a hold (Capabilities.Values): Election.Leader and Observe are unsupported")
	}
}

// campaign wins the election el with value, or fails the case.
func campaign(t *T, el dlock.Election, value string) dlock.Lease {
	l, err := el.Campaign(t.Context(), value)
	if err != nil {
		t.Fatalf("Campaign(%q) on %q: %v", value, el.Key(), err)
	}
	return l
}

// campaignWithin wins el with value, failing the case when the leadership
// is not won within d; what names the Campaign in the message.
func campaignWithin(t *T, el dlock.Election, value string, d time.Duration, what string) dlock.Lease {
	ctx, cancel := contextWithTimeout(t, d)
	defer cancel()
	l, err := el.Campaign(ctx, value)
	if err != nil {
		t.Fatalf("%s: got %v, want the leadership within %v", what, err, d)
	}
	return l
}

// resign gives up el's leadership, or fails the case.
func resign(t *T, el dlock.Election) {
	if err := el.Resign(t.Context()); err != nil {
		t.Errorf("Resign(%q): %v", el.Key(), err)
	}
}

// expectLeader checks that el reports exactly the leadership of l, won
// with value: its value and its lease's token, from one hold.
func expectLeader(t *T, el dlock.Election, value string, l dlock.Lease, why string) {
	want := dlock.Leadership{Value: value, Term: l.Token()}
	got, err := el.Leader(t.Context())
	if err != nil {
		t.Fatalf("Leader(%q): got %v, want %v: %s", el.Key(), err, want, why)
	}
	if got != want {
		t.Errorf("Leader(%q): got %v, want exactly %v (the leader's value and its Lease.Token): %s", el.Key(), fmtLeadership(got), fmtLeadership(want), why)
	}
}

// expectNoLeader checks that el reports nobody leading.
func expectNoLeader(t *T, el dlock.Election, why string) {
	got, err := el.Leader(t.Context())
	if !errors.Is(err, dlock.ErrNoLeader) {
		t.Errorf("Leader(%q): got %v, %v; want ErrNoLeader: %s", el.Key(), fmtLeadership(got), err, why)
	}
}

// expectTermAbove checks that the leadership next, won after earlier's, has
// the greater term (when the driver issues tokens at all).
func expectTermAbove(t *T, next, earlier dlock.Lease, what string) {
	if a, b := earlier.Token(), next.Token(); a != 0 && b <= a {
		t.Errorf("term of %s: got %d, want more than the earlier leader's %d", what, b, a)
	}
}

// fmtLeadership shows a leadership with its value quoted, so that an empty
// or odd value is visible.
func fmtLeadership(l dlock.Leadership) string {
	return fmt.Sprintf("{value %q, term %d}", l.Value, l.Term)
}

// endLeadership gives up a watched leadership with give (the Election's
// Resign, or the Lease's Unlock, which a leader may use alike) and records
// its hold in hs, trusted until now, its deadline, or its loss, whichever
// came first, as holds.unlock does for a lock.
func endLeadership(t *T, hs *holds, w *held, give func(context.Context) error) {
	lost := w.l.Err() != nil
	w.h.end = earliest(time.Now(), w.l.Deadline()) // as renewed so far
	err := give(t.Context())
	if lost {
		w.h.end = earliest(w.h.end, <-w.ended)
	}
	if err != nil && !errors.Is(err, dlock.ErrLockLost) {
		t.Errorf("giving up the leadership: %v", err)
	}
	hs.mu.Lock()
	hs.all = append(hs.all, w.h)
	hs.mu.Unlock()
}

// observeWait bounds how long an observer may take to report a change: its
// next look comes at a notification, or within the longest polling interval
// the core uses (a second), on top of the usual margins.
func observeWait(e *env) time.Duration { return e.ttl + e.slack + 2*time.Second }
