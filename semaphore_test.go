package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/drivers/memory"
)

// semaphore makes the Semaphore key with permits on c, or ends the test.
func semaphore(t *testing.T, c *dlock.Client, key string, permits int, opts ...dlock.Option) dlock.Semaphore {
	t.Helper()
	s, err := c.Semaphore(key, permits, opts...)
	if err != nil {
		t.Fatalf("Semaphore(%q, %d): %v", key, permits, err)
	}
	return s
}

// keyRefusing is a driver whose CheckKey refuses keys with a suffix.
type keyRefusing struct {
	driver.Driver
	suffix string
}

func (d keyRefusing) Capabilities() driver.Capabilities {
	caps := d.Driver.Capabilities()
	caps.CheckKey = func(key string) error {
		if strings.HasSuffix(key, d.suffix) {
			return fmt.Errorf("no keys ending in %q", d.suffix)
		}
		return nil
	}
	return caps
}

func TestSemaphoreRefusesBadInput(t *testing.T) {
	b := memory.NewBackend()
	c := newClient(t, b)
	for _, tc := range []struct {
		name    string
		key     string
		permits int
		opts    []dlock.Option
		want    error
	}{
		{"no permits", "k", 0, nil, dlock.ErrInvalidPermits},
		{"negative permits", "k", -1, nil, dlock.ErrInvalidPermits},
		{"too many permits", "k", dlock.MaxPermits + 1, nil, dlock.ErrInvalidPermits},
		{"empty key", "", 1, nil, dlock.ErrInvalidKey},
		{"derived keys too long", strings.Repeat("k", 1020), 1, nil, dlock.ErrInvalidKey},
		{"reentrant", "k", 1, []dlock.Option{dlock.WithOwner("o")}, dlock.ErrInvalidOption},
		{"client-level option", "k", 1, []dlock.Option{dlock.WithLogger(nil)}, dlock.ErrInvalidOption},
		{"bad TTL", "k", 1, []dlock.Option{dlock.WithTTL(time.Nanosecond)}, dlock.ErrInvalidTTL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := c.Semaphore(tc.key, tc.permits, tc.opts...)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Semaphore(%d bytes, %d): got %v, %v; want %v", len(tc.key), tc.permits, s, err, tc.want)
			}
		})
	}
	if _, err := c.Semaphore("k", dlock.MaxPermits); err != nil {
		t.Errorf("Semaphore with MaxPermits: %v", err)
	}

	// The derived keys pass the driver's own rules too.
	for _, suffix := range []string{"/gate", "/permit/2"} {
		rc := newClientOver(t, keyRefusing{memory.New(b), suffix})
		if _, err := rc.Semaphore("k", 3); !errors.Is(err, dlock.ErrInvalidKey) || !strings.Contains(err.Error(), suffix) {
			t.Errorf("a driver refusing keys ending in %q: got %v, want ErrInvalidKey naming the derived key", suffix, err)
		}
		if _, err := rc.Semaphore("k", 2); suffix == "/permit/2" && err != nil {
			t.Errorf("a driver refusing keys ending in %q, 2 permits: %v", suffix, err)
		}
	}

	closed, err := dlock.New(memory.New(b))
	if err != nil {
		t.Fatal(err)
	}
	_ = closed.Close(t.Context())
	if _, err := closed.Semaphore("k", 1); !errors.Is(err, dlock.ErrClosed) {
		t.Errorf("Semaphore after Close: got %v, want ErrClosed", err)
	}
}

func TestSemaphoreTryAcquire(t *testing.T) {
	b := memory.NewBackend()
	ctx := t.Context()
	s := semaphore(t, newClient(t, b), "jobs", 2)
	other := semaphore(t, newClient(t, b), "jobs", 2)
	if s.Key() != "jobs" || s.Permits() != 2 {
		t.Errorf("Key, Permits: got %q, %d", s.Key(), s.Permits())
	}
	l1, err := s.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l2, err := other.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l1.Key() == l2.Key() || !strings.HasPrefix(l1.Key(), "jobs/permit/") || !strings.HasPrefix(l2.Key(), "jobs/permit/") {
		t.Errorf("permit keys: got %q and %q, want two distinct jobs/permit/N", l1.Key(), l2.Key())
	}
	if _, err := other.TryAcquire(ctx); !errors.Is(err, dlock.ErrLocked) {
		t.Fatalf("TryAcquire with every permit held: got %v, want ErrLocked", err)
	}
	if err := l1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l3, err := other.TryAcquire(ctx)
	if err != nil {
		t.Fatalf("TryAcquire after a permit was given back: %v", err)
	}
	if l3.Key() != l1.Key() || l3.Token() <= l1.Token() {
		t.Errorf("the permit given back: got %q token %d, want %q with a token above %d", l3.Key(), l3.Token(), l1.Key(), l1.Token())
	}
	for _, l := range []dlock.Lease{l2, l3} {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		requireFree(t, b, fmt.Sprintf("jobs/permit/%d", i))
	}
	requireFree(t, b, "jobs/gate")
}

// The ways a Client can wait for a permit: in the backend's queue for the
// gate (Blocking), by notifications, and by polling alone.
var semaphoreDrivers = map[string]func(*memory.Backend) driver.Driver{
	"Blocking":      func(b *memory.Backend) driver.Driver { return memory.New(b) },
	"Notifications": func(b *memory.Backend) driver.Driver { return memory.New(b, memory.WithoutBlocking()) },
	"Polling":       func(b *memory.Backend) driver.Driver { return plainDriver{memory.New(b)} },
}

func TestSemaphoreAcquireWaitsForAPermit(t *testing.T) {
	for name, newDriver := range semaphoreDrivers {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := memory.NewBackend()
			ctx := t.Context()
			holder := semaphore(t, newClientOver(t, newDriver(b)), "pool", 2)
			waiter := semaphore(t, newClientOver(t, newDriver(b)), "pool", 2)
			held := []dlock.Lease{}
			for range 2 {
				l, err := holder.Acquire(ctx)
				if err != nil {
					t.Fatal(err)
				}
				held = append(held, l)
			}
			got := lockAsync(ctx, waiter.Acquire)
			waitUntil(t, "the waiter to hold the gate", func() bool { _, ok := b.Inspect("pool/gate"); return ok })
			select {
			case r := <-got:
				t.Fatalf("Acquire with every permit held returned %v, %v", r.l, r.err)
			default:
			}
			if err := held[1].Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			r := <-got
			if r.err != nil {
				t.Fatalf("Acquire after a permit was given back: %v", r.err)
			}
			if r.l.Key() != held[1].Key() {
				t.Errorf("Acquire took %q, want the permit given back, %q", r.l.Key(), held[1].Key())
			}
			waitUntil(t, "the gate to be free", func() bool { _, ok := b.Inspect("pool/gate"); return !ok })
			for _, l := range []dlock.Lease{held[0], r.l} {
				if err := l.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestSemaphoreCancelledAcquireLeavesNothing(t *testing.T) {
	for name, newDriver := range semaphoreDrivers {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := memory.NewBackend()
			holder := semaphore(t, newClientOver(t, newDriver(b)), "pool", 1)
			waiters := newClientOver(t, newDriver(b))
			waiter := semaphore(t, waiters, "pool", 1)
			held, err := holder.Acquire(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			// One waiter holds the gate, the other waits for it.
			ctx, cancel := context.WithCancel(t.Context())
			first := lockAsync(ctx, waiter.Acquire)
			waitUntil(t, "the first waiter to hold the gate", func() bool { _, ok := b.Inspect("pool/gate"); return ok })
			second := lockAsync(ctx, waiter.Acquire)
			waitUntil(t, "the second waiter to queue", func() bool { return waiters.Waiters("pool/gate") == 1 })
			cancel()
			for _, got := range []<-chan lockResult{first, second} {
				if r := <-got; r.err != context.Canceled {
					t.Errorf("cancelled Acquire: got %v, %v; want exactly context.Canceled", r.l, r.err)
				}
			}
			if err := held.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, "the gate to be free", func() bool { _, ok := b.Inspect("pool/gate"); return !ok })
			requireFree(t, b, "pool/permit/0")
		})
	}
}

func TestSemaphoreWaitersOfAClientInOrder(t *testing.T) {
	const waiters = 4
	b := memory.NewBackend()
	ctx := t.Context()
	holder := semaphore(t, newClient(t, b), "fifo", 1)
	c := newClient(t, b)
	s := semaphore(t, c, "fifo", 1)
	held, err := holder.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	order := make(chan int, waiters)
	var wg sync.WaitGroup
	for i := range waiters {
		wg.Go(func() {
			l, err := s.Acquire(ctx)
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			order <- i
			if err := l.Unlock(ctx); err != nil {
				t.Errorf("waiter %d: Unlock: %v", i, err)
			}
		})
		if i == 0 {
			waitUntil(t, "the first waiter to hold the gate", func() bool { _, ok := b.Inspect("fifo/gate"); return ok })
		} else {
			waitUntil(t, "the waiter to queue", func() bool { return c.Waiters("fifo/gate") == i })
		}
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(order)
	want := 0
	for got := range order {
		if got != want {
			t.Errorf("waiter %d got the permit in turn %d: a Client's waiters are served in arrival order", got, want)
		}
		want++
	}
}

func TestSemaphoreNeverAdmitsMoreThanItsPermits(t *testing.T) {
	const permits, clients, workers, rounds = 3, 4, 3, 10
	for name, newDriver := range semaphoreDrivers {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := memory.NewBackend()
			ctx := t.Context()
			var mu sync.Mutex
			inside, most := 0, 0
			tokens := map[string]uint64{}
			var wg sync.WaitGroup
			for range clients {
				s := semaphore(t, newClientOver(t, newDriver(b)), "bound", permits)
				for w := range workers {
					wg.Go(func() {
						for range rounds {
							acquire := s.Acquire
							if w == 0 {
								acquire = s.TryAcquire
							}
							l, err := acquire(ctx)
							if errors.Is(err, dlock.ErrLocked) && w == 0 {
								continue
							} else if err != nil {
								t.Errorf("Acquire: %v", err)
								return
							}
							mu.Lock()
							inside++
							most = max(most, inside)
							if last := tokens[l.Key()]; l.Token() <= last {
								t.Errorf("permit %q: token %d after %d", l.Key(), l.Token(), last)
							}
							tokens[l.Key()] = l.Token()
							mu.Unlock()
							time.Sleep(time.Millisecond) // the work: others contend meanwhile
							mu.Lock()
							inside--
							mu.Unlock()
							if err := l.Unlock(ctx); err != nil {
								t.Errorf("Unlock: %v", err)
								return
							}
						}
					})
				}
			}
			wg.Wait()
			if most > permits {
				t.Errorf("%d holders at once, want at most %d", most, permits)
			}
			t.Logf("at most %d holders at once", most)
		})
	}
}

func TestSemaphoreAcquireEndsOnClose(t *testing.T) {
	for name, newDriver := range semaphoreDrivers {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := memory.NewBackend()
			held, err := semaphore(t, newClientOver(t, newDriver(b)), "closing", 1).Acquire(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			c, err := dlock.New(newDriver(b))
			if err != nil {
				t.Fatal(err)
			}
			got := lockAsync(t.Context(), semaphore(t, c, "closing", 1).Acquire)
			waitUntil(t, "the waiter to hold the gate", func() bool { _, ok := b.Inspect("closing/gate"); return ok })
			if err := c.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
			if r := <-got; !errors.Is(r.err, dlock.ErrClosed) {
				t.Errorf("Acquire waiting as its Client closes: got %v, %v; want ErrClosed", r.l, r.err)
			}
			requireFree(t, b, "closing/gate")
			_ = held.Unlock(t.Context())
		})
	}
}
