package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/drivers/memory"
)

// Every transition of the handoff's state machine (handoff.go), each made
// by the Client in the situation that calls for it, with what must hold
// afterwards: the lock is held by the waiter that got it, or by nobody.
func TestHandoffEveryTransition(t *testing.T) {
	scenarios := []struct {
		name string
		run  func(t *testing.T) []dlock.HandoffStep
		want []string // the transitions the scenario must make
	}{
		{"HandedOver", handedOver, []string{
			"unoffered --offer--> offered", "offered --claim--> claimed",
			"claimed --deliver--> delivered", "delivered --receive--> received",
		}},
		{"WithdrawnAsContextEnds", withdrawnAsContextEnds, []string{"offered --leave--> withdrawn"}},
		{"AbandonedDuringTransfer", abandonedDuringTransfer, []string{
			"claimed --leave--> abandoned", "abandoned --deliver--> givenBack",
		}},
		{"GivenBackAfterDelivery", givenBackAfterDelivery, []string{"delivered --leave--> givenBack"}},
		{"CloseDuringTransfer", closeDuringTransfer, []string{
			"claimed --leave--> abandoned", "abandoned --deliver--> givenBack",
		}},
	}
	covered := map[string]bool{}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			var made []string
			for _, s := range sc.run(t) {
				made = append(made, s.String())
			}
			for _, w := range sc.want {
				if !slices.Contains(made, w) {
					t.Errorf("transition %s not made; made %q", w, made)
				}
				covered[w] = true
			}
		})
	}
	for _, tr := range dlock.HandoffTransitions() {
		if !covered[tr.String()] {
			t.Errorf("no scenario makes the transition %s", tr)
		}
	}
}

// handedOver: an Unlock transfers to the offered waiter, which takes it.
func handedOver(t *testing.T) []dlock.HandoffStep {
	b := memory.NewBackend()
	d := newGated(b)
	h := hold(t, d, "handed")
	next := handOver(t, h.c, h.m, h.held, nil)
	if n := d.count.Load(); n != 1 {
		t.Errorf("%d transfers, want 1", n)
	}
	if next.Token() <= h.held.Token() {
		t.Errorf("token %d after %d, want greater", next.Token(), h.held.Token())
	}
	if err := next.Unlock(t.Context()); err != nil {
		t.Errorf("Unlock of the handed-over lease: %v", err)
	}
	requireFree(t, b, "handed")
	return h.steps()
}

// withdrawnAsContextEnds: the offered waiter's context ends before any
// Unlock: it takes its offer back, and the holder keeps the lock.
func withdrawnAsContextEnds(t *testing.T) []dlock.HandoffStep {
	b := memory.NewBackend()
	h := hold(t, newGated(b), "withdrawn")
	waitCtx, cancel := context.WithCancel(t.Context())
	got := h.waiter(t, waitCtx)
	cancel()
	if r := <-got; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("Lock after its context ended: %v, want context.Canceled", r.err)
	}
	if dlock.Offered(h.c, "withdrawn") {
		t.Error("the offer is still out after its waiter left")
	}
	requireHeld(t, b, "withdrawn")
	if err := h.held.Unlock(t.Context()); err != nil {
		t.Errorf("Unlock: %v", err)
	}
	requireFree(t, b, "withdrawn")
	return h.steps()
}

// gatedHolding is a holding over a gatedTransfers whose transfers wait for
// its gate.
func gatedHolding(t *testing.T, b *memory.Backend, key string) (*gatedTransfers, holding) {
	d := newGated(b)
	d.gate, d.entered = make(chan struct{}), make(chan struct{}, 1)
	return d, hold(t, d, key)
}

// abandonedDuringTransfer: the waiter's context ends while the Unlock's
// transfer to it is in flight: the Unlock gives the transferred lock back.
func abandonedDuringTransfer(t *testing.T) []dlock.HandoffStep {
	b := memory.NewBackend()
	d, h := gatedHolding(t, b, "abandoned")
	waitCtx, cancel := context.WithCancel(t.Context())
	got := h.waiter(t, waitCtx)
	unlocked := make(chan error, 1)
	go func() { unlocked <- h.held.Unlock(t.Context()) }()
	<-d.entered // the transfer is in flight
	cancel()
	if r := <-got; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("Lock after its context ended mid-handoff: %v, want context.Canceled", r.err)
	}
	close(d.gate)
	if err := <-unlocked; err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if n := d.count.Load(); n != 1 {
		t.Errorf("%d transfers, want 1", n)
	}
	requireFree(t, b, "abandoned") // the transfer happened, and was given back
	return h.steps()
}

// givenBackAfterDelivery: the transfer is delivered while the waiter is
// busy elsewhere (in Subscribe), and its context ends before it reads the
// outcome: the waiter gives the lock back itself.
func givenBackAfterDelivery(t *testing.T) []dlock.HandoffStep {
	ctx := t.Context()
	b := memory.NewBackend()
	d := &stallingSubscriber{Driver: memory.New(b, memory.WithoutBlocking()), entered: make(chan struct{}, 1)}
	// The waiters sleep until a handoff reaches them: no polls.
	h := hold(t, d, "delivered", dlock.WithPolling(time.Hour, time.Hour))
	first := h.waiter(t, ctx) // its Subscribe is refused: it sleeps with its offer out
	secondCtx, cancel := context.WithCancel(ctx)
	second := lockAsync(secondCtx, h.m.Lock)
	waitUntil(t, "the second waiter", func() bool { return h.c.Waiters("delivered") == 2 })
	if err := h.held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-first
	if r.err != nil {
		t.Fatalf("the first waiter's Lock: %v", r.err)
	}
	// The second waiter, promoted with an offer out behind a head that
	// left with the lock, is now in Subscribe.
	<-d.entered
	if !dlock.Offered(h.c, "delivered") {
		t.Fatal("the promoted waiter has no offer out")
	}
	if err := r.l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock of the first waiter's lease: %v", err)
	}
	cancel()
	if r := <-second; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("the second waiter's Lock: %v, want context.Canceled", r.err)
	}
	requireFree(t, b, "delivered")
	return h.steps()
}

// closeDuringTransfer: Close runs while an Unlock transfers to a waiter.
// The waiter gets ErrClosed, Close waits for the Unlock, and the Unlock
// gives the transferred lock back.
func closeDuringTransfer(t *testing.T) []dlock.HandoffStep {
	ctx := t.Context()
	b := memory.NewBackend()
	d, h := gatedHolding(t, b, "closing")
	got := h.waiter(t, ctx)
	unlocked := make(chan error, 1)
	go func() { unlocked <- h.held.Unlock(ctx) }()
	<-d.entered
	closed := make(chan error, 1)
	go func() { closed <- h.c.Close(ctx) }()
	if r := <-got; !errors.Is(r.err, dlock.ErrClosed) {
		t.Fatalf("the waiter's Lock during Close: %v, want ErrClosed", r.err)
	}
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while an Unlock was transferring", err)
	default:
	}
	close(d.gate)
	if err := <-unlocked; err != nil {
		t.Errorf("Unlock: %v", err)
	}
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
	requireFree(t, b, "closing")
	return h.steps()
}

// handoffShapes are the two ways a Client hands a lock over: by the
// backend's Transfer, or by the next token of the grant's block.
var handoffShapes = map[string]func(b *memory.Backend) driver.Driver{
	"Transfer": func(b *memory.Backend) driver.Driver { return newGated(b) },
	"TokenBlock": func(b *memory.Backend) driver.Driver {
		return memory.New(b, memory.WithoutBlocking(), memory.WithTokenBlocks(8))
	},
}

// handoffRounds is how many times each race is run.
const handoffRounds = 25

// raceHandoff runs race handoffRounds times for each handoff shape, each
// time over a new backend with a lease held on key and a waiter, whose
// context cancel ends, with its offer out; round is the round's number.
func raceHandoff(t *testing.T, key string, opts []dlock.Option, race func(t *testing.T, round int, b *memory.Backend, h holding, cancel context.CancelFunc, got <-chan lockResult)) {
	for name, shape := range handoffShapes {
		t.Run(name, func(t *testing.T) {
			for i := range handoffRounds {
				t.Run(fmt.Sprintf("Round%d", i), func(t *testing.T) {
					b := memory.NewBackend()
					h := hold(t, shape(b), key, opts...)
					waitCtx, cancel := context.WithCancel(t.Context())
					defer cancel()
					race(t, i, b, h, cancel, h.waiter(t, waitCtx))
				})
			}
		})
	}
}

// interleave runs a and b, in an order that depends on round: a first, b
// first, or both at once.
func interleave(round int, a, b func()) {
	switch round % 3 {
	case 0:
		a()
		b()
	case 1:
		b()
		a()
	default:
		done := make(chan struct{})
		go func() {
			defer close(done)
			a()
		}()
		b()
		<-done
	}
}

// The waiter's context ends just as the lease it waits for is unlocked and
// offered to it: whichever comes first, the waiter holds the lock alone, or
// nobody does.
func TestHandoffRaceWaiterCancelled(t *testing.T) {
	raceHandoff(t, "cancelled", nil, func(t *testing.T, round int, b *memory.Backend, h holding, cancel context.CancelFunc, got <-chan lockResult) {
		var err error
		interleave(round, cancel, func() { err = h.held.Unlock(t.Context()) })
		if err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		r := <-got
		switch {
		case r.err == nil:
			requireHeld(t, b, "cancelled")
			if err := r.l.Unlock(t.Context()); err != nil {
				t.Fatalf("Unlock of the waiter's lease: %v", err)
			}
		case !errors.Is(r.err, context.Canceled):
			t.Fatalf("the waiter's Lock: %v", r.err)
		}
		requireFree(t, b, "cancelled")
	})
}

// The lease is lost (a stranger takes the lock behind its back) just as it
// is unlocked and offered to a waiter: a lease the waiter gets must learn
// that it lost the lock, however the loss and the handoff interleave.
func TestHandoffRaceLeaseLost(t *testing.T) {
	raceHandoff(t, "lost", []dlock.Option{dlock.WithTTL(time.Hour)}, func(t *testing.T, round int, b *memory.Backend, h holding, cancel context.CancelFunc, got <-chan lockResult) {
		var stranger bool
		var err error
		interleave(round, func() { stranger = b.Tamper("lost", true) }, func() { err = h.held.Unlock(t.Context()) })
		if err != nil && !errors.Is(err, dlock.ErrLockLost) {
			t.Fatalf("Unlock: %v", err)
		}
		cancel() // the stranger holds the lock for an hour
		r := <-got
		switch {
		case r.err == nil && stranger:
			select {
			case <-r.l.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("the waiter's lease was not told that a stranger holds the lock")
			}
			if err := r.l.Err(); !errors.Is(err, dlock.ErrLockLost) {
				t.Errorf("Err of the waiter's lease: %v, want ErrLockLost", err)
			}
		case r.err == nil: // the lock was free when the stranger came: the waiter holds it
			_ = r.l.Unlock(t.Context())
		case !errors.Is(r.err, context.Canceled):
			t.Fatalf("the waiter's Lock: %v", r.err)
		}
	})
}
