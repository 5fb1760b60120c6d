package conformance

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/drivers/memory"
)

// A driver that declares ClientsServedInOrder but serves its waiting
// clients newest first (a stack where a queue belongs, as a backend that
// lets the latest waiter's retry win would): each of the order cases must
// catch it, and pass the same driver serving its line oldest first.
func TestSuiteCatchesClientsServedOutOfOrder(t *testing.T) {
	for _, name := range []string{"ClientsServedInOrder", "SemaphoreClientsServedInOrder"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			expectCaught(t, linedHarness(true), linedHarness(false), name)
		})
	}
}

// linedHarness declares the order, over lineDrivers that share one line of
// waiting Acquire calls per key, as clients of one server share its queue.
func linedHarness(newestFirst bool) Harness {
	line := &waitLine{newestFirst: newestFirst, keys: map[string][]*lineTicket{}}
	h := brokenHarness(func(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver {
		return &lineDriver{plainDriver: d, line: line}
	})
	h.ClientsServedInOrder = true
	return h
}

// waitLine is the backend's queue of blocked Acquire calls, by key. Only
// the call it serves tries the lock: the first to arrive, or, broken, the
// last. A single try (no Request.Block) passes it by, as on a server.
type waitLine struct {
	newestFirst bool
	mu          sync.Mutex
	keys        map[string][]*lineTicket
}

// lineTicket is one blocked Acquire call's place in the line, known by its
// address: it has a size, since pointers to zero-size values may be equal.
type lineTicket struct{ _ byte }

func (w *waitLine) join(key string) *lineTicket {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := &lineTicket{}
	w.keys[key] = append(w.keys[key], t)
	return t
}

func (w *waitLine) leave(key string, t *lineTicket) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := slices.DeleteFunc(w.keys[key], func(o *lineTicket) bool { return o == t })
	if len(q) == 0 {
		delete(w.keys, key)
		return
	}
	w.keys[key] = q
}

// served reports whether t is the call the line lets try now.
func (w *waitLine) served(key string, t *lineTicket) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.keys[key]
	if w.newestFirst {
		return q[len(q)-1] == t
	}
	return q[0] == t
}

func (w *waitLine) len(key string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.keys[key])
}

// lineDriver is a Blocking plainDriver whose blocked Acquire calls wait in
// a waitLine, and whose Inspector counts them (as the order cases need).
type lineDriver struct {
	*plainDriver
	line *waitLine
}

func (d *lineDriver) Capabilities() driver.Capabilities {
	return driver.Capabilities{Blocking: true, Inspector: d}
}

// linePoll is how often the served call tries the lock: the in-process
// backend cannot tell it of a release, and a try costs nothing.
const linePoll = 2 * time.Millisecond

func (d *lineDriver) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	if !req.Block {
		return d.plainDriver.Acquire(ctx, req)
	}
	start := time.Now()
	t := d.line.join(req.Key)
	defer d.line.leave(req.Key, t)
	try := req
	try.Block = false
	for {
		if d.line.served(req.Key, t) {
			tried := time.Now()
			l, err := d.plainDriver.Acquire(ctx, try)
			if err == nil {
				// The promise starts at the grant, which the wait preceded
				// (requirement 4): the time in line is added to validity.
				wl := &waitedLease{plainLease: l.(*plainLease)}
				wl.waited.Store(int64(tried.Sub(start)))
				return wl, nil
			}
			if !errors.Is(err, driver.ErrLocked) {
				return nil, err
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(linePoll):
		}
	}
}

// Inspect is the memory driver's, with the line's length as Waiters.
func (d *lineDriver) Inspect(ctx context.Context, key string) (driver.Info, error) {
	info, err := d.Driver.Capabilities().Inspector.Inspect(ctx, key)
	info.Waiters = d.line.len(key)
	return info, err
}

// waitedLease is a grant that waited in line: its validity counts from the
// call's start until the first Extend.
type waitedLease struct {
	*plainLease
	waited atomic.Int64 // a time.Duration; zero once extended
}

func (l *waitedLease) Validity() time.Duration {
	return l.plainLease.Validity() + time.Duration(l.waited.Load())
}

func (l *waitedLease) Extend(ctx context.Context, ttl time.Duration) error {
	err := l.plainLease.Extend(ctx, ttl)
	if err == nil {
		l.waited.Store(0)
	}
	return err
}

// A harness that declares the order over a driver that cannot count its
// waiters fails both cases (they cannot know when a client is queued)
// rather than skip them or guess with a sleep.
func TestOrderDeclarationNeedsWaiters(t *testing.T) {
	t.Parallel()
	h := brokenHarness(unbrokenBlocking) // Blocking, with no Inspector
	h.ClientsServedInOrder = true
	names := []string{"ClientsServedInOrder", "SemaphoreClientsServedInOrder"}
	results, err := runNamed(h, names...)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		r := results[name]
		if !r.failed || !strings.Contains(strings.Join(r.logs, "\n"), "needs the driver's Inspector") {
			t.Errorf("case %s with the order declared and no Inspector: failed %v, skipped %q, want a failure naming the Inspector:\n%s", name, r.failed, r.skipped, strings.Join(r.logs, "\n"))
		}
	}
}
