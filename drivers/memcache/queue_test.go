package memcache

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

// TestLineServesDriversFairly runs 4 Drivers, each the independent client of
// a process, with 2 goroutines each taking one lock in turn until 800
// critical sections have run, and counts the sections each Driver got. A
// fair lock gives each about 200, in runs of up to 9 (the core hands the
// lock between a Client's goroutines up to 8 times in a row), and the line
// lets the waiters inside its window (here nearly all of them) take it in
// no particular order; the bound asks for an eighth of that, about 3 runs,
// loose enough for a loaded machine. Without the line, the Driver that
// releases takes the lock back at once, almost every time (its goroutines
// hand it to each other, and then its next add comes before any other
// Driver's poll), and some Drivers get none (main at 18e0fe1: 5 runs of 5
// left a Driver with none).
func TestLineServesDriversFairly(t *testing.T) {
	const (
		drivers  = 4
		perDrv   = 2
		sections = 800
		atLeast  = sections / drivers / 8
	)
	key := testkit.Key(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	var (
		mu    sync.Mutex
		done  int
		got   [drivers]int
		first error
	)
	var wg sync.WaitGroup
	for i := range drivers {
		c := testkit.Client(t, newTestDriver(t, newMC(t)), dlock.WithTTL(15*time.Second))
		m := testkit.Mutex(t, c, key)
		for range perDrv {
			wg.Go(func() {
				for {
					l, err := m.Lock(ctx)
					if err != nil {
						mu.Lock()
						if first == nil && done < sections {
							first = err
						}
						mu.Unlock()
						return
					}
					mu.Lock()
					over := done >= sections
					if !over {
						done++
						got[i]++
					}
					mu.Unlock()
					if err := l.Unlock(ctx); err != nil {
						t.Errorf("Unlock: %v", err)
					}
					if over {
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if first != nil {
		t.Fatalf("Lock: %v", first)
	}
	t.Logf("sections per Driver: %v", got)
	for i, n := range got {
		if n < atLeast {
			t.Errorf("Driver %d got %d of %d sections, want at least %d (all: %v)", i, n, sections, atLeast, got)
		}
	}
}

// TestLineSkipsVanishedTickets takes tickets for three Drivers, as many as
// poll fast at the head of the line, closes them while they wait, and checks
// that the Driver behind them, which defers to them, gets the free lock
// within stallPolls+1 of its attempts (the first one reads "served" for the first time): counted, not timed (the bound in time,
// stallAfter, can only make it sooner).
func TestLineSkipsVanishedTickets(t *testing.T) {
	ctx := ctxFor(t)
	key := testkit.Key(t)
	req := func() driver.Request { return waiting(testkit.Request(key, 15*time.Second)) }
	refused := func(d *Driver) {
		t.Helper()
		_, err := d.Acquire(ctx, req())
		if !errors.Is(err, driver.ErrLocked) {
			t.Fatalf("Acquire of a held lock: %v, want ErrLocked", err)
		}
	}

	// A first waiter is served with a ticket, so that "served" exists.
	holder, first := newTestDriver(t, newMC(t)), newTestDriver(t, newMC(t))
	l := mustAcquire(t, holder, req())
	refused(first)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l = mustAcquire(t, first, req())

	// Three more take tickets while it holds, and vanish.
	for range window {
		d, err := New(newMC(t))
		if err != nil {
			t.Fatal(err)
		}
		refused(d)
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
	last := newTestDriver(t, newMC(t))
	refused(last)
	if got := last.places.m[namesOf(last.prefix, key).lock].ticket; got != window+2 {
		t.Fatalf("the last waiter's ticket is %d, want %d", got, window+2)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}

	for attempt := 1; ; attempt++ {
		l, err := last.Acquire(ctx, req())
		if err == nil {
			t.Logf("granted at attempt %d", attempt)
			_ = l.Release(ctx)
			return
		}
		var le *driver.LockedError
		if !errors.As(err, &le) {
			t.Fatalf("attempt %d: %v, want a LockedError", attempt, err)
		}
		if le.RetryAfter <= 0 || le.RetryAfter > backMax {
			t.Errorf("attempt %d: RetryAfter %v, want in (0, %v]", attempt, le.RetryAfter, backMax)
		}
		if attempt > stallPolls {
			t.Fatalf("the free lock was refused %d times behind vanished tickets", attempt)
		}
	}
}

// TestLineLostCountersDegrade deletes the counters while a Driver waits with
// a ticket: its next attempt goes as without a line, and takes the free lock.
func TestLineLostCountersDegrade(t *testing.T) {
	ctx := ctxFor(t)
	key := testkit.Key(t)
	req := func() driver.Request { return waiting(testkit.Request(key, 15*time.Second)) }
	mc := newMC(t)
	holder, waiter := newTestDriver(t, newMC(t)), newTestDriver(t, mc)
	l := mustAcquire(t, holder, req())
	for range 2 {
		if _, err := waiter.Acquire(ctx, req()); !errors.Is(err, driver.ErrLocked) {
			t.Fatalf("Acquire of a held lock: %v, want ErrLocked", err)
		}
	}
	n := namesOf(waiter.prefix, key)
	for _, name := range []string{n.next, n.served} {
		_ = mc.Delete(name)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l = mustAcquire(t, waiter, req())
	_ = l.Release(ctx)
}

// TestTurnRetryAfter checks the pacing: fast within the window, growing with
// the distance beyond it by half the time a ticket takes (at least backStep),
// and capped.
func TestTurnRetryAfter(t *testing.T) {
	for _, c := range []struct {
		t    turn
		want time.Duration
	}{
		{turn{}, fastRetry},
		{turn{ticket: 5, pos: 1}, fastRetry},
		{turn{ticket: 5, pos: window}, fastRetry},
		{turn{ticket: 9, pos: window + 2}, backStep},
		{turn{ticket: 900, pos: 900, gap: backStep}, backMax},
		{turn{ticket: 9, pos: window + 2, gap: 3 * backStep}, 3 * backStep},
		{turn{ticket: 9, pos: window + 1, gap: backStep}, backStep},
	} {
		if got := c.t.retryAfter(); got != c.want {
			t.Errorf("%+v.retryAfter() = %v, want %v", c.t, got, c.want)
		}
	}
}

// TestLineLeavesSemaphoresAlone fills a semaphore of 4 and has another
// Client try it: its refused tries take no tickets (the core tries permits
// without driver.Request.Wait: a semaphore's waiter tries every permit, and a
// line per permit would only cost requests), so a TryAcquire of the full
// semaphore costs what it did without the line.
func TestLineLeavesSemaphoresAlone(t *testing.T) {
	ctx := ctxFor(t)
	key := testkit.Key(t)
	const permits = 4
	full := testkit.Client(t, newTestDriver(t, newMC(t)), dlock.WithTTL(15*time.Second))
	var w wire
	mc := w.client(t, server.URL)
	other := testkit.Client(t, newTestDriver(t, mc), dlock.WithTTL(15*time.Second))
	s, err := full.Semaphore(key, permits)
	if err != nil {
		t.Fatal(err)
	}
	for range permits {
		l, err := s.TryAcquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = l.Unlock(ctx) }()
	}
	o, err := other.Semaphore(key, permits)
	if err != nil {
		t.Fatal(err)
	}
	var costs []int64
	for range 3 {
		before := w.requests.Load()
		if _, err := o.TryAcquire(ctx); !errors.Is(err, dlock.ErrLocked) {
			t.Fatalf("TryAcquire of a full semaphore: %v, want ErrLocked", err)
		}
		costs = append(costs, w.requests.Load()-before)
	}
	t.Logf("requests per TryAcquire of a full semaphore of %d: %v", permits, costs)
	for i := range permits {
		n := namesOf(DefaultKeyPrefix, key+"/permit/"+strconv.Itoa(i))
		if _, err := mc.Get(n.next); !errors.Is(err, gomemcache.ErrCacheMiss) {
			t.Errorf("permit %d has a ticket counter (%v)", i, err)
		}
	}
}

// waiting returns req as the core sends it for a Lock that waits
// (driver.Request.Wait): only such requests take tickets.
func waiting(req driver.Request) driver.Request {
	req.Wait = true
	return req
}

// TestTryLockTakesNoTicket tries a held lock without driver.Request.Wait, as
// a TryLock does, through the core and directly: the line's ticket counter
// stays as it was (missing, then at the one ticket a waiting request took),
// and the Driver keeps no ticket. A TryLock that took one would hold up
// the line's waiters behind it until it lapsed.
func TestTryLockTakesNoTicket(t *testing.T) {
	ctx := ctxFor(t)
	key := testkit.Key(t)
	mc := newMC(t)
	holder := newTestDriver(t, newMC(t))
	l := mustAcquire(t, holder, testkit.Request(key, 15*time.Second))
	defer func() { _ = l.Release(ctx) }()
	n := namesOf(DefaultKeyPrefix, key)
	next := func() string {
		t.Helper()
		it, err := mc.Get(n.next)
		if errors.Is(err, gomemcache.ErrCacheMiss) {
			return "missing"
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(it.Value)
	}

	d := newTestDriver(t, newMC(t))
	m := testkit.Mutex(t, testkit.Client(t, d, dlock.WithTTL(15*time.Second)), key)
	for range 3 {
		if _, err := m.TryLock(ctx); !errors.Is(err, dlock.ErrLocked) {
			t.Fatalf("TryLock of a held lock: %v, want ErrLocked", err)
		}
		if _, err := d.Acquire(ctx, testkit.Request(key, 15*time.Second)); !errors.Is(err, driver.ErrLocked) {
			t.Fatalf("Acquire without Wait of a held lock: %v, want ErrLocked", err)
		}
	}
	if got := next(); got != "missing" {
		t.Fatalf("after TryLocks, the ticket counter is %s, want missing", got)
	}

	// A waiting request takes ticket 1; TryLocks after it leave it there,
	// and do not use the Driver's ticket either.
	other := newTestDriver(t, newMC(t))
	if _, err := other.Acquire(ctx, waiting(testkit.Request(key, 15*time.Second))); !errors.Is(err, driver.ErrLocked) {
		t.Fatalf("waiting Acquire of a held lock: %v, want ErrLocked", err)
	}
	if got := next(); got != "1" {
		t.Fatalf("after a waiting Acquire, the ticket counter is %s, want 1", got)
	}
	for range 3 {
		if _, err := m.TryLock(ctx); !errors.Is(err, dlock.ErrLocked) {
			t.Fatalf("TryLock of a held lock: %v, want ErrLocked", err)
		}
		if _, err := other.Acquire(ctx, testkit.Request(key, 15*time.Second)); !errors.Is(err, driver.ErrLocked) {
			t.Fatalf("Acquire without Wait of a held lock: %v, want ErrLocked", err)
		}
	}
	if got := next(); got != "1" {
		t.Fatalf("after TryLocks, the ticket counter is %s, want 1", got)
	}
	d.places.mu.Lock()
	places := len(d.places.m)
	d.places.mu.Unlock()
	if places != 0 {
		t.Errorf("the TryLocks' Driver has %d places, want none", places)
	}
}

// TestLockTakesTicket checks the other side: a Lock through the core that
// is refused takes a ticket (the core sets driver.Request.Wait on its tries,
// the first included), and gets the lock once it is released.
func TestLockTakesTicket(t *testing.T) {
	ctx := ctxFor(t)
	key := testkit.Key(t)
	mc := newMC(t)
	holder := newTestDriver(t, newMC(t))
	l := mustAcquire(t, holder, testkit.Request(key, 15*time.Second))
	m := testkit.Mutex(t, testkit.Client(t, newTestDriver(t, newMC(t)), dlock.WithTTL(15*time.Second)), key)
	type result struct {
		l   dlock.Lease
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := m.Lock(ctx)
		got <- result{l, err}
	}()
	n := namesOf(DefaultKeyPrefix, key)
	for {
		if it, err := mc.Get(n.next); err == nil {
			if string(it.Value) != "1" {
				t.Fatalf("the ticket counter is %s after one waiting Lock, want 1", it.Value)
			}
			break
		} else if !errors.Is(err, gomemcache.ErrCacheMiss) {
			t.Fatal(err)
		}
		select {
		case r := <-got:
			t.Fatalf("Lock of a held lock returned %v, %v", r.l, r.err)
		case <-ctx.Done():
			t.Fatal("the waiting Lock took no ticket")
		case <-time.After(5 * time.Millisecond): // polling the server, not synchronising
		}
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("Lock after the release: %v", r.err)
	}
	_ = r.l.Unlock(ctx)
}

// TestLineUncontendedLeavesNoPlace checks that a lock nobody waited for
// costs the Driver no entry in its table of places, nor the server any
// counter.
func TestLineUncontendedLeavesNoPlace(t *testing.T) {
	ctx := ctxFor(t)
	key := testkit.Key(t)
	mc := newMC(t)
	d := newTestDriver(t, mc)
	for range 3 {
		l := mustAcquire(t, d, testkit.Request(key, 15*time.Second))
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	d.places.mu.Lock()
	n := len(d.places.m)
	d.places.mu.Unlock()
	if n != 0 {
		t.Errorf("%d places after uncontended Acquires, want none", n)
	}
	names := namesOf(d.prefix, key)
	for _, name := range []string{names.next, names.served} {
		if _, err := mc.Get(name); !errors.Is(err, gomemcache.ErrCacheMiss) {
			t.Errorf("%s after uncontended Acquires: %v, want a miss", name, err)
		}
	}
}
