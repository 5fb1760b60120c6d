package dlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/drivers/memory"
	"github.com/dlock-go/dlock/internal/testkit"
)

// A loss the driver reports (Lease.OnLoss) ends the lease at once, long
// before renewal or the deadline would find it, whether the lease calls
// back at once or from a watched context's goroutine.
func TestBackendReportedLoss(t *testing.T) {
	for name, opts := range map[string][]memory.Option{
		"OnLoss":            nil,
		"OnLossFromContext": {memory.WithContextLossReports()},
	} {
		t.Run(name, func(t *testing.T) {
			b := memory.NewBackend()
			l := hold(t, memory.New(b, opts...), "k", dlock.WithTTL(time.Hour), dlock.WithoutRenewal()).held
			b.Tamper("k", false)
			select {
			case <-l.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("the lease did not end after the backend reported its loss")
			}
			if err := l.Err(); !errors.Is(err, dlock.ErrLockLost) || !errors.Is(err, memory.ErrTampered) {
				t.Errorf("Err: got %v, want ErrLockLost wrapping the backend's reason", err)
			}
		})
	}
}

// Without renewal, the deadline alone ends the lease, not before it; many
// leases of one Client, with deadlines in any order, each end at their own.
func TestDeadlinesWithoutRenewal(t *testing.T) {
	b := memory.NewBackend()
	c, err := dlock.New(memory.New(b, memory.WithoutLossReports()), dlock.WithoutRenewal())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(t.Context())
	ttls := []time.Duration{300 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, time.Hour}
	var leases []dlock.Lease
	for i, ttl := range ttls {
		m := testkit.Mutex(t, c, string(rune('a'+i)), dlock.WithTTL(ttl))
		l := mustLock(t, m)
		leases = append(leases, l)
	}
	for i, l := range leases[:3] {
		select {
		case <-l.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("lease %d did not end by its deadline", i)
		}
		if early := time.Until(l.Deadline()); early > 0 {
			t.Errorf("lease %d ended %v before its deadline", i, early)
		}
		if err := l.Err(); !errors.Is(err, dlock.ErrLockLost) {
			t.Errorf("lease %d: Err %v, want ErrLockLost", i, err)
		}
	}
	if err := leases[3].Err(); err != nil {
		t.Errorf("the lease with an hour to go ended: %v", err)
	}
	// Extend moves a deadline: the lease then ends at the new one.
	m, _ := c.Mutex("extended", dlock.WithTTL(200*time.Millisecond))
	l := mustLock(t, m)
	first := l.Deadline()
	if err := l.Extend(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("an extended lease did not end by its deadline")
	}
	if early := time.Until(l.Deadline()); early > 0 || !l.Deadline().After(first) {
		t.Errorf("extended lease: ended %v before its deadline %v (first %v)", early, l.Deadline(), first)
	}
}

// Done is made when first asked for: asked before the end, it closes then;
// asked only after, it is closed already. Either way it is one channel.
func TestDoneBeforeAndAfterTheEnd(t *testing.T) {
	c := newClient(t, memory.NewBackend())
	ma, _ := c.Mutex("a")
	mb, _ := c.Mutex("b")
	la := mustLock(t, ma)
	lb := mustLock(t, mb)
	before := la.Done()
	if before != la.Done() {
		t.Fatal("Done returned two channels")
	}
	select {
	case <-before:
		t.Fatal("Done closed while held")
	default:
	}
	for _, l := range []dlock.Lease{la, lb} {
		if err := l.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	for name, done := range map[string]<-chan struct{}{"asked before": before, "asked after": lb.Done()} {
		select {
		case <-done:
		default:
			t.Errorf("Done %s the end is not closed", name)
		}
	}
	if la.Done() != before {
		t.Error("Done changed at the end")
	}
}
