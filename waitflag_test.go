package dlock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/drivers/memory"
	"github.com/dlock-go/dlock/internal/testkit"
)

// waitRecorder is a driver without capabilities (so without a Notifier)
// that records, per key, the Wait flag of every Acquire it is sent.
type waitRecorder struct {
	plainDriver
	mu    sync.Mutex
	waits map[string][]bool
}

func newWaitRecorder(b *memory.Backend) *waitRecorder {
	return &waitRecorder{plainDriver: plainDriver{memory.New(b)}, waits: map[string][]bool{}}
}

func (d *waitRecorder) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	d.mu.Lock()
	d.waits[req.Key] = append(d.waits[req.Key], req.Wait)
	d.mu.Unlock()
	return d.plainDriver.Acquire(ctx, req)
}

// sent returns the Wait flags of the Acquires of key so far, and forgets
// them.
func (d *waitRecorder) sent(key string) []bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	w := d.waits[key]
	delete(d.waits, key)
	return w
}

// count returns how many Acquires of key were sent since the last sent.
func (d *waitRecorder) count(key string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.waits[key])
}

// Without a Notifier, the core sets driver.Request.Wait on every try of a
// Lock that waits, its first included, so that a driver keeping a line of
// waiters need not guess; never on a TryLock's try.
func TestWaitSetOnWaitingLockWithoutNotifier(t *testing.T) {
	b := memory.NewBackend()
	key := testkit.Key(t)
	held := mustLock(t, testkit.Mutex(t, newClient(t, b), key))
	d := newWaitRecorder(b)
	m := testkit.Mutex(t, newClientOver(t, d), key)

	if _, err := m.TryLock(t.Context()); !errors.Is(err, dlock.ErrLocked) {
		t.Fatalf("TryLock of a held lock: %v, want ErrLocked", err)
	}
	if got := d.sent(key); len(got) != 1 || got[0] {
		t.Fatalf("a TryLock's Acquires had Wait %v, want [false]", got)
	}

	got := lockAsync(t.Context(), m.Lock)
	waitUntil(t, "three tries of the waiting Lock", func() bool { return d.count(key) >= 3 })
	if err := held.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("Lock after the release: %v", r.err)
	}
	for i, w := range d.sent(key) {
		if !w {
			t.Errorf("try %d of a waiting Lock had no Wait", i)
		}
	}
	if err := r.l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}

	// An uncontended Lock's only try has Wait too: a driver must make it
	// cost nothing more when the lock is free.
	l := mustLock(t, m)
	if got := d.sent(key); len(got) != 1 || !got[0] {
		t.Errorf("an uncontended Lock's Acquires had Wait %v, want [true]", got)
	}
	_ = l.Unlock(t.Context())
}

// A semaphore tries its permits as TryLocks, so without Wait, whether it
// is tried (TryAcquire) or waited for (Acquire); its gate is a Lock.
func TestWaitNeverSetOnPermits(t *testing.T) {
	b := memory.NewBackend()
	key := testkit.Key(t)
	const permits = 2
	full, err := newClient(t, b).Semaphore(key, permits)
	if err != nil {
		t.Fatal(err)
	}
	var holds []dlock.Lease
	for range permits {
		l, err := full.TryAcquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		holds = append(holds, l)
	}
	d := newWaitRecorder(b)
	s, err := newClientOver(t, d).Semaphore(key, permits)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.TryAcquire(t.Context()); !errors.Is(err, dlock.ErrLocked) {
		t.Fatalf("TryAcquire of a full semaphore: %v, want ErrLocked", err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	got := lockAsync(ctx, s.Acquire)
	permitTries := func() int {
		d.mu.Lock()
		defer d.mu.Unlock()
		n := 0
		for k, w := range d.waits {
			if strings.HasPrefix(k, key+"/permit/") {
				n += len(w)
			}
		}
		return n
	}
	// The TryAcquire's tries, then at least two rounds of the Acquire's.
	waitUntil(t, "the waiting Acquire's tries", func() bool { return permitTries() >= 3*permits })
	if err := holds[0].Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("Acquire after a release: %v", r.err)
	}
	_ = r.l.Unlock(t.Context())
	_ = holds[1].Unlock(t.Context())

	d.mu.Lock()
	defer d.mu.Unlock()
	gate := 0
	for k, ws := range d.waits {
		for i, w := range ws {
			switch {
			case strings.HasPrefix(k, key+"/permit/") && w:
				t.Errorf("try %d of permit %s had Wait", i, k)
			case k == key+"/gate":
				gate++
				if !w {
					t.Errorf("try %d of the gate (a Lock) had no Wait", i)
				}
			}
		}
	}
	if gate == 0 {
		t.Error("the gate was never tried")
	}
}
