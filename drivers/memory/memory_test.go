package memory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/drivers/memory"
)

// The options decide the one value the driver declares.
func TestCapabilitiesFollowOptions(t *testing.T) {
	type want struct {
		blocking, notifier, transferer bool
		tokenBlock                     uint64
	}
	for name, tc := range map[string]struct {
		opts []memory.Option
		want want
	}{
		"Default":              {nil, want{blocking: true, notifier: true}},
		"WithoutBlocking":      {[]memory.Option{memory.WithoutBlocking()}, want{notifier: true, transferer: true}},
		"WithoutNotifications": {[]memory.Option{memory.WithoutNotifications()}, want{blocking: true}},
		"TokenBlocks":          {[]memory.Option{memory.WithoutBlocking(), memory.WithTokenBlocks(8)}, want{notifier: true, transferer: true, tokenBlock: 8}},
		"TokenBlockOfOne":      {[]memory.Option{memory.WithoutBlocking(), memory.WithTokenBlocks(1)}, want{notifier: true, transferer: true}},
	} {
		t.Run(name, func(t *testing.T) {
			caps := memory.New(memory.NewBackend(), tc.opts...).Capabilities()
			got := want{caps.Blocking, caps.Notifier != nil, caps.Transferer != nil, caps.TokenBlock}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if !caps.Shared || !caps.Reentrant || caps.BatchExtender == nil || caps.Inspector == nil {
				t.Errorf("Shared, Reentrant, BatchExtender and Inspector are always on: %+v", caps)
			}
			if err := caps.Check(); err != nil {
				t.Errorf("Check: %v", err)
			}
		})
	}
}

// Token blocks need WithoutBlocking: a Blocking driver with a TokenBlock is
// refused by dlock.New, not silently stripped of its blocks.
func TestTokenBlocksWhileBlockingRefused(t *testing.T) {
	d := memory.New(memory.NewBackend(), memory.WithTokenBlocks(8))
	if err := d.Capabilities().Check(); err == nil {
		t.Error("Check accepted a Blocking driver with a TokenBlock")
	}
	if _, err := dlock.New(d); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Errorf("dlock.New: got %v, want ErrInvalidOption", err)
	}
}

// Request.Block is for Blocking drivers only: the core never sends it to
// others, and the memory driver refuses it rather than wait.
func TestBlockRefusedWithoutBlocking(t *testing.T) {
	d := memory.New(memory.NewBackend(), memory.WithoutBlocking())
	defer d.Close()
	req := driver.Request{Key: "k", ID: "id", TTL: time.Second, Block: true}
	if l, err := d.Acquire(t.Context(), req); err == nil || errors.Is(err, driver.ErrLocked) {
		if l != nil {
			_ = l.Release(t.Context())
		}
		t.Fatalf("Acquire with Block on a driver WithoutBlocking: got %v, want a plain error", err)
	}
}

// A lease reports a loss once, with the reason, and never once Release has
// returned, in both ways of reporting; WithoutLossReports, never.
func TestLossReports(t *testing.T) {
	for name, tc := range map[string]struct {
		opts    []memory.Option
		reports bool
	}{
		"Direct":             {nil, true},
		"ContextLossReports": {[]memory.Option{memory.WithContextLossReports()}, true},
		"WithoutLossReports": {[]memory.Option{memory.WithoutLossReports()}, false},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			b := memory.NewBackend()
			d := memory.New(b, tc.opts...)
			defer d.Close()
			acquire := func(key string) (driver.Lease, chan error) {
				l, err := d.Acquire(ctx, driver.Request{Key: key, ID: key, TTL: time.Hour})
				if err != nil {
					t.Fatal(err)
				}
				got := make(chan error, 2)
				l.OnLoss(func(reason error) { got <- reason })
				return l, got
			}
			lost, lostReports := acquire("lost")
			released, releasedReports := acquire("released")
			if err := released.Release(ctx); err != nil {
				t.Fatal(err)
			}
			b.Tamper("lost", false)
			b.Restart() // would tell "released" too, were it still listened to
			select {
			case reason := <-lostReports:
				if !tc.reports {
					t.Fatalf("a lease WithoutLossReports reported %v", reason)
				}
				if !errors.Is(reason, memory.ErrTampered) {
					t.Errorf("reason %v, want ErrTampered", reason)
				}
			case <-time.After(100 * time.Millisecond):
				if tc.reports {
					t.Fatal("no loss report within 100ms")
				}
			}
			// A loss before OnLoss is reported by OnLoss, at once.
			if tc.reports {
				early, err := d.Acquire(ctx, driver.Request{Key: "early", ID: "early", TTL: time.Hour})
				if err != nil {
					t.Fatal(err)
				}
				b.Tamper("early", false)
				earlyReports := make(chan error, 2)
				early.OnLoss(func(reason error) { earlyReports <- reason })
				select {
				case reason := <-earlyReports:
					if !errors.Is(reason, memory.ErrTampered) {
						t.Errorf("reason %v, want ErrTampered", reason)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("no loss report of a lock tampered with before OnLoss")
				}
			}
			time.Sleep(50 * time.Millisecond)
			select {
			case reason := <-lostReports:
				t.Errorf("a second report: %v", reason)
			case reason := <-releasedReports:
				t.Errorf("a released lease reported %v", reason)
			default:
			}
			_ = lost.Release(context.Background())
		})
	}
}

// Inspect counts the blocked Acquire calls of a Blocking driver, which wait
// in the backend's queue, and says it cannot count those of a driver made
// WithoutBlocking, which wait outside it.
func TestInspectCountsQueuedWaiters(t *testing.T) {
	b := memory.NewBackend()
	d := memory.New(b)
	defer d.Close()
	in := d.Capabilities().Inspector
	ctx := t.Context()
	holder, err := d.Acquire(ctx, driver.Request{Key: "k", ID: "holder", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	waiting, cancel := context.WithCancel(ctx)
	done := make(chan error, 2)
	for _, id := range []string{"w1", "w2"} {
		go func() {
			_, err := d.Acquire(waiting, driver.Request{Key: "k", ID: id, TTL: time.Minute, Block: true})
			done <- err
		}()
	}
	// Polled: the waiters' arrival in the queue is what is observed.
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := in.Inspect(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if info.Waiters == 2 {
			break
		}
		if info.Waiters > 2 || info.Waiters < 0 || time.Now().After(deadline) {
			t.Fatalf("Waiters = %d with two blocked Acquire calls", info.Waiters)
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	for range 2 {
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled waiter: %v", err)
		}
	}
	if info, _ := in.Inspect(ctx, "k"); info.Waiters != 0 {
		t.Errorf("Waiters = %d once the waiters left, want 0", info.Waiters)
	}
	_ = holder.Release(ctx)

	nb := memory.New(b, memory.WithoutBlocking())
	defer nb.Close()
	if info, _ := nb.Capabilities().Inspector.Inspect(ctx, "k"); info.Waiters != -1 {
		t.Errorf("Waiters = %d WithoutBlocking, want -1: its waiters wait outside the backend", info.Waiters)
	}
}
