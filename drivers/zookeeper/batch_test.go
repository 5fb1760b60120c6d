package zookeeper

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/benchkit"
	"github.com/dlock-go/dlock/internal/liblog"
	"github.com/dlock-go/dlock/internal/testkit"
)

// batchSession is the session timeout the batch tests ask for, and their
// leases' TTL: long, so that the first of many leases acquired on a loaded
// machine does not lapse before the batch that renews them. The server
// grants at most its maxSessionTimeout (40 s with ZooKeeper's defaults);
// the Driver uses what it grants.
const batchSession = 40 * time.Second

// opMultiCode is the opcode of a multi request on the wire.
const opMultiCode = 14

// wire counts the multi requests a connection writes, and the largest.
type wire struct {
	multis  atomic.Int64
	largest atomic.Int64 // bytes, length prefix included
}

// countingConn passes a connection through, counting on w the multi
// requests written on it. The client library writes each request whole, in
// one Write: a 4-byte length, then the request header (xid, opcode), then
// the body. The first write of a connection is the connect request, which
// has no such header.
type countingConn struct {
	net.Conn
	w         *wire
	connected atomic.Bool
}

func (c *countingConn) Write(p []byte) (int, error) {
	if c.connected.Swap(true) && len(p) >= 12 && binary.BigEndian.Uint32(p[8:12]) == opMultiCode {
		c.w.multis.Add(1)
		for {
			largest := c.w.largest.Load()
			if int64(len(p)) <= largest || c.w.largest.CompareAndSwap(largest, int64(len(p))) {
				break
			}
		}
	}
	return c.Conn.Write(p)
}

// countedDriver returns a Driver over a connection of its own whose multi
// requests are counted, with a session of session (as granted) and a base
// path no other test uses. The Driver, then the connection, are closed when
// tb ends.
func countedDriver(tb testing.TB, session time.Duration) (*Driver, *wire) {
	tb.Helper()
	w := &wire{}
	var granted atomic.Int64
	dialer := func(network, address string, timeout time.Duration) (net.Conn, error) {
		c, err := net.DialTimeout(network, address, timeout)
		if err != nil {
			return nil, err
		}
		counting := &countingConn{Conn: c, w: w}
		return &sniffConn{Conn: counting, granted: func(t time.Duration) { granted.Store(int64(t)) }}, nil
	}
	conn, _, err := zk.Connect([]string{serverAddr(tb)}, session, zk.WithDialer(dialer), zk.WithLogger(liblog.Printf("go-zookeeper")))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(conn.Close)
	waitUntil(tb, 30*time.Second, "a session with the test server", func() bool {
		return conn.State() == zk.StateHasSession && granted.Load() > 0
	})
	d := testkit.Closing(tb, "New", func() (*Driver, error) {
		return New(conn, time.Duration(granted.Load()), WithBasePath("/dlock-test"+testBase()))
	})
	return d, w
}

// acquireMany takes n locks on d, named prefix/0 to prefix/n-1, a few
// at a time, with the batch tests' TTL.
func acquireMany(tb testing.TB, d *Driver, prefix string, n int) []driver.Lease {
	tb.Helper()
	leases := make([]driver.Lease, n)
	errs := make([]error, n)
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for i := range leases {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			req := driver.Request{Key: fmt.Sprintf("%s/%d", prefix, i), ID: testkit.NewID(), TTL: batchSession, Mode: driver.Exclusive}
			leases[i], errs[i] = d.Acquire(ctxFor(tb), req)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		tb.Fatalf("acquiring %d locks: %v", n, err)
	}
	return leases
}

// ttlsFor returns the batch tests' TTL for each of n leases.
func ttlsFor(n int) []time.Duration {
	ttls := make([]time.Duration, n)
	for i := range ttls {
		ttls[i] = batchSession
	}
	return ttls
}

// extendBatch runs d.ExtendBatch and returns its errors and the number of
// multis it sent.
func extendBatch(t *testing.T, d *Driver, w *wire, leases []driver.Lease) ([]error, int64) {
	t.Helper()
	before := w.multis.Load()
	errs := d.ExtendBatch(ctxFor(t), leases, ttlsFor(len(leases)))
	if len(errs) != len(leases) {
		t.Fatalf("ExtendBatch of %d leases returned %d errors", len(leases), len(errs))
	}
	return errs, w.multis.Load() - before
}

// lost reports whether l's loss has been reported.
func lost(l driver.Lease) bool { return lostContext(l).Err() != nil }

// lostContext returns a context cancelled when l reports its loss, with the
// reason as its cause, as the core listens (Lease.OnLoss): at once
// when l was lost already.
func lostContext(l driver.Lease) context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	l.OnLoss(func(reason error) { cancel(reason) })
	return ctx
}

// TestExtendBatchMany: a batch larger than one multi is confirmed in one
// multi per batchOps checks, every lease of it.
func TestExtendBatchMany(t *testing.T) {
	const n = 1500
	d, w := countedDriver(t, batchSession)
	leases := acquireMany(t, d, "many", n)
	errs, multis := extendBatch(t, d, w, leases)
	for i, err := range errs {
		if err != nil {
			t.Errorf("lease %d: %v", i, err)
		}
	}
	if want := int64((n + batchOps - 1) / batchOps); multis != want {
		t.Errorf("ExtendBatch of %d leases sent %d multis, want %d", n, multis, want)
	}
	for i, l := range leases {
		if lost(l) {
			t.Fatalf("lease %d lost after a successful batch", i)
		}
	}
}

// TestExtendBatchLongKeys: with the longest keys, the byte budget splits the
// batch before the operation cap does, and keeps every multi well within
// the server's request limit (jute.maxbuffer, 1 MiB by default), which one
// multi of them all would exceed.
func TestExtendBatchLongKeys(t *testing.T) {
	const n = 400
	d, w := countedDriver(t, batchSession)
	// 1020 slashes escape to 3060 bytes: paths of about 3150 bytes, 1.2 MB
	// of checks in all.
	leases := acquireMany(t, d, strings.Repeat("/", 1020), n)
	errs, multis := extendBatch(t, d, w, leases)
	for i, err := range errs {
		if err != nil {
			t.Errorf("lease %d: %v", i, err)
		}
	}
	total := 0
	for _, l := range leases {
		total += checkOpBytes + len(l.(*lease).path)
	}
	if total <= 1<<20 {
		t.Fatalf("the batch's checks take %d bytes: too few to need splitting", total)
	}
	// Each multi but the last is filled to within one operation of the budget.
	maxOp := checkOpBytes + len(leases[0].(*lease).path) + 10
	if want := int64(total/(batchBytes-maxOp) + 1); multis > want {
		t.Errorf("ExtendBatch sent %d multis for %d bytes of checks, want at most %d", multis, total, want)
	}
	if largest := w.largest.Load(); largest > batchBytes+64 {
		t.Errorf("largest multi request: %d bytes, want at most the budget %d and headers", largest, batchBytes)
	}
}

// TestExtendBatchLost: when nodes of some leases are gone, exactly those
// leases get ErrNotHeld and are lost, and every other lease of the batch is
// confirmed; correlated losses are found by reads after probeAfter failed
// multis, not one multi each.
func TestExtendBatchLost(t *testing.T) {
	d, w := countedDriver(t, batchSession)
	conn := rawConn(t)
	everyFourth := map[int]bool{}
	for i := 0; i < 200; i += 4 {
		everyFourth[i] = true
	}
	for _, c := range []struct {
		name   string
		n      int
		gone   map[int]bool
		multis int64 // sent by the batch
	}{
		// One failed multi finds the lease; the rest of it is sent again.
		{"one", 50, map[int]bool{17: true}, 2},
		{"first-and-last", 50, map[int]bool{0: true, 49: true}, 2},
		// Two failed multis, then reads find the other 48.
		{"many", 200, everyFourth, probeAfter + 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			leases := acquireMany(t, d, "lost-"+c.name, c.n)
			for i := range c.gone {
				// What an operator with zkCli would do.
				if err := conn.Delete(leases[i].(*lease).path, -1); err != nil {
					t.Fatal(err)
				}
			}
			errs, multis := extendBatch(t, d, w, leases)
			for i, err := range errs {
				switch {
				case c.gone[i] && !errors.Is(err, driver.ErrNotHeld):
					t.Errorf("lease %d, whose node is gone: got %v, want ErrNotHeld", i, err)
				case c.gone[i] && !lost(leases[i]):
					t.Errorf("lease %d, whose node is gone: not reported lost", i)
				case !c.gone[i] && err != nil:
					t.Errorf("lease %d, held: %v", i, err)
				case !c.gone[i] && lost(leases[i]):
					t.Errorf("lease %d, held: reported lost", i)
				}
			}
			if multis != c.multis {
				t.Errorf("ExtendBatch sent %d multis, want %d", multis, c.multis)
			}
			// The next batch skips the lost leases without asking the server,
			// as Extend would, and confirms the others in one multi.
			errs, multis = extendBatch(t, d, w, leases)
			for i, err := range errs {
				if c.gone[i] != errors.Is(err, driver.ErrNotHeld) || !c.gone[i] && err != nil {
					t.Errorf("second batch, lease %d (gone %v): %v", i, c.gone[i], err)
				}
			}
			if multis != 1 {
				t.Errorf("second batch sent %d multis, want 1", multis)
			}
		})
	}
}

// TestExtendBatchEntry: a lease that joined another request's reentrant
// hold is checked on its entry node too, and a missing entry node is
// reported for it alone, although the hold's node, which the lease after it
// rests on, is checked in the same multi.
func TestExtendBatchEntry(t *testing.T) {
	d, w := countedDriver(t, batchSession)
	conn := rawConn(t)
	other, err := d.Acquire(ctxFor(t), driver.Request{Key: "plain", ID: testkit.NewID(), TTL: batchSession})
	if err != nil {
		t.Fatal(err)
	}
	first, err := d.Acquire(ctxFor(t), driver.Request{Key: "reentrant", ID: testkit.NewID(), TTL: batchSession, Owner: "o"})
	if err != nil {
		t.Fatal(err)
	}
	joined, err := d.Acquire(ctxFor(t), driver.Request{Key: "reentrant", ID: testkit.NewID(), TTL: batchSession, Owner: "o"})
	if err != nil {
		t.Fatal(err)
	}
	entry := joined.(*lease).entry
	if entry == "" || joined.(*lease).path != first.(*lease).path {
		t.Fatalf("the second request did not join the first's hold: entry %q, node %q", entry, joined.(*lease).path)
	}
	leases := []driver.Lease{other, joined, first}
	if errs, multis := extendBatch(t, d, w, leases); errors.Join(errs...) != nil || multis != 1 {
		t.Fatalf("batch with every node in place: %v in %d multis, want success in 1", errs, multis)
	}
	if err := conn.Delete(entry, -1); err != nil {
		t.Fatal(err)
	}
	errs, _ := extendBatch(t, d, w, leases)
	if errs[0] != nil || !errors.Is(errs[1], driver.ErrNotHeld) || errs[2] != nil {
		t.Errorf("batch with the joined entry's node gone: got %v, want [nil ErrNotHeld nil]", errs)
	}
	if lost(first) || !lost(joined) {
		t.Errorf("lost: first entry %v, joined entry %v; want false, true", lost(first), lost(joined))
	}
}

// fakeLease is a lease of no driver of this package.
type fakeLease struct{ driver.Lease }

// TestExtendBatchForeign: leases of another Driver, or of another driver
// altogether, get an error saying so, and do not disturb the batch; a lease
// that ended gets ErrNotHeld, as from Extend.
func TestExtendBatchForeign(t *testing.T) {
	d, w := countedDriver(t, batchSession)
	leases := acquireMany(t, d, "mine", 3)
	other, _ := countedDriver(t, batchSession)
	theirs := acquireMany(t, other, "theirs", 1)[0]
	if err := leases[2].Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	batch := []driver.Lease{leases[0], theirs, fakeLease{}, nil, leases[2], leases[1]}
	errs, multis := extendBatch(t, d, w, batch)
	for i, want := range []error{nil, errForeignLease, errForeignLease, errForeignLease, driver.ErrNotHeld, nil} {
		if !errors.Is(errs[i], want) || want == nil && errs[i] != nil {
			t.Errorf("lease %d: got %v, want %v", i, errs[i], want)
		}
	}
	if multis != 1 {
		t.Errorf("sent %d multis, want 1", multis)
	}
	if lost(theirs) {
		t.Error("the other Driver's lease was disturbed")
	}
}

// TestExtendBatchStopped: a batch after its context ended, or after Close,
// fails every lease with that error and sends nothing.
func TestExtendBatchStopped(t *testing.T) {
	d, w := countedDriver(t, batchSession)
	leases := acquireMany(t, d, "stopped", 3)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	before := w.multis.Load()
	for i, err := range d.ExtendBatch(ctx, leases, ttlsFor(len(leases))) {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("lease %d, context cancelled: got %v, want context.Canceled", i, err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	for i, err := range d.ExtendBatch(ctxFor(t), leases, ttlsFor(len(leases))) {
		if !errors.Is(err, driver.ErrClosed) {
			t.Errorf("lease %d, Driver closed: got %v, want ErrClosed", i, err)
		}
	}
	if sent := w.multis.Load() - before; sent != 0 {
		t.Errorf("sent %d multis, want none", sent)
	}
}

// batchCounter counts the ExtendBatch calls the core makes to a Driver; it
// keeps every other method, and so every optional interface, of the Driver.
type batchCounter struct {
	*Driver
	calls atomic.Int64
}

func (b *batchCounter) ExtendBatch(ctx context.Context, leases []driver.Lease, ttls []time.Duration) []error {
	b.calls.Add(1)
	return b.Driver.ExtendBatch(ctx, leases, ttls)
}

// BenchmarkBatchHeld measures the renewal of 1,000 locks held on one client
// (internal/benchkit's held-locks measurement): batches/period is the
// core's renewal batches (ExtendBatch calls) per renewal period, and
// multis/trip the multis (round trips) each sent.
//
//	go test -run '^$' -bench BatchHeld -benchtime 1x ./drivers/zookeeper/
func BenchmarkBatchHeld(b *testing.B) {
	const locks, ttl, periods = 1000, 3 * time.Second, 3
	for b.Loop() {
		d, w := countedDriver(b, testSession)
		counter := &batchCounter{Driver: d}
		target := benchkit.Target{
			Name: "zookeeper",
			NewClient: func(ctx context.Context, opts ...dlock.Option) (*dlock.Client, error) {
				return dlock.New(counter, opts...)
			},
			MinTTL: d.SessionTTL(),
		}
		h, err := benchkit.MeasureManyHeld(b.Context(), target, locks, ttl, periods)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(h.RenewalTripsPeriod, "batches/period")
		b.ReportMetric(h.RenewalsPerPeriod, "renewals/period")
		if calls := counter.calls.Load(); calls > 0 {
			b.ReportMetric(float64(w.multis.Load())/float64(calls), "multis/trip")
		}
	}
}
