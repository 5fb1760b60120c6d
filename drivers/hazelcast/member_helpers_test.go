package hazelcast

import (
	"context"
	"crypto/rand"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/hazelcast/hazelcast-go-client"
)

// Helpers of the tests that need a real cluster (server.Need skips them
// without one).

// testMapName returns a lock map name no other test run uses, so that runs
// against an external cluster never meet each other's locks.
func testMapName() string {
	return "dlock-test-" + strings.ToLower(rand.Text()[:8])
}

// memberURL returns the test cluster's URL with the lock map mapName.
func memberURL(tb testing.TB, mapName string) *url.URL {
	tb.Helper()
	server.Need(tb)
	return testkit.URL(tb, testkit.WithQuery(tb, server.URL, paramMap, mapName))
}

// rawClient returns a plain Hazelcast client of the test cluster, shut down
// when tb ends: a stranger to the driver, or the caller's client for New.
func rawClient(tb testing.TB) *hazelcast.Client {
	tb.Helper()
	return rawClientOf(tb, memberURL(tb, DefaultMap))
}

// rawClientOf is rawClient for the cluster at u (a driver URL).
func rawClientOf(tb testing.TB, u *url.URL) *hazelcast.Client {
	tb.Helper()
	cfg, _, err := parseURL(u)
	if err != nil {
		tb.Fatalf("parseURL: %v", err)
	}
	c, err := hazelcast.StartNewClientWithConfig(ctxFor(tb), cfg)
	if err != nil {
		tb.Fatalf("connect to the test cluster: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Shutdown(ctx)
	})
	return c
}

// openMember returns a Driver made from the test cluster's URL with the
// lock map mapName, closed when tb ends.
func openMember(tb testing.TB, mapName string) *Driver {
	tb.Helper()
	u := memberURL(tb, mapName)
	return testkit.Closing(tb, "open", func() (driver.Driver, error) { return open(ctxFor(tb), u) }).(*Driver)
}

// memberDriver is a Driver of the test cluster whose calls go through a
// recorder, and the lock and fencing maps it uses, for probes.
type memberDriver struct {
	*Driver
	rec    *recorder
	locks  *hazelcast.Map
	fences *hazelcast.Map
}

// newMemberDriver opens a Driver on the test cluster with the lock map
// mapName (a fresh one when ""), records its calls, and closes it when tb
// ends.
func newMemberDriver(tb testing.TB, mapName string, opts ...Option) *memberDriver {
	tb.Helper()
	if mapName == "" {
		mapName = testMapName()
	}
	d := openMember(tb, mapName)
	o := defaultOptions()
	if err := o.apply(opts); err != nil {
		tb.Fatalf("options: %v", err)
	}
	d.waitSlice = o.waitSlice
	real := d.api.(hzAPI)
	rec := newRecorder(tb, real)
	d.api = rec
	return &memberDriver{Driver: d, rec: rec, locks: real.locks, fences: real.fences}
}

// heldLock starts a test of one lease: goroutines it leaves behind fail t
// (testkit.NoLeaks), and d, a member driver on a lock map of t's own, holds
// the lock of a key of t's own as l.
func heldLock(t *testing.T) (d *memberDriver, key string, l *lease) {
	t.Helper()
	testkit.NoLeaks(t)
	d = newMemberDriver(t, "")
	key = testkit.Key(t)
	return d, key, d.acquire(t, key)
}

// twoDrivers starts a test of two lock clients: goroutines it leaves
// behind fail t (testkit.NoLeaks), and da and db are member drivers on one
// lock map of t's own, db with opts.
func twoDrivers(t *testing.T, opts ...Option) (da, db *memberDriver) {
	t.Helper()
	testkit.NoLeaks(t)
	da = newMemberDriver(t, "")
	return da, newMemberDriver(t, da.locks.Name(), opts...)
}

// acquire takes key or fails tb.
func (m *memberDriver) acquire(tb testing.TB, key string) *lease {
	tb.Helper()
	return mustAcquire(tb, m.Driver, key)
}

// locked reports whether the member holds key's lock for anyone.
func (m *memberDriver) locked(tb testing.TB, key string) bool {
	tb.Helper()
	ok, err := m.locks.IsLocked(ctxFor(tb), mapKey(key))
	if err != nil {
		tb.Fatalf("IsLocked: %v", err)
	}
	return ok
}

// expectFree fails tb with the message held when the member holds key's
// lock for anyone.
func (m *memberDriver) expectFree(tb testing.TB, key, held string) {
	tb.Helper()
	if m.locked(tb, key) {
		tb.Fatal(held)
	}
}

// expectNextGrant fails tb unless next, m's lease granted after prev of
// the same key, has a greater token, and the member holds it baseHolds
// times for next's owner.
func (m *memberDriver) expectNextGrant(tb testing.TB, prev, next *lease) {
	tb.Helper()
	if next.Token() <= prev.Token() {
		tb.Errorf("tokens %d then %d, want increasing", prev.Token(), next.Token())
	}
	if n := m.holds(tb, next); n != baseHolds {
		tb.Errorf("the member holds the next grant's lock %d times for its owner, want %d", n, baseHolds)
	}
}

// holds returns how many times l's owner holds its lock, found by leaving
// the lock until the member refuses: the lock is free afterwards (for l's
// owner), so call it last.
func (m *memberDriver) holds(tb testing.TB, l *lease) int {
	tb.Helper()
	lc, release := l.owner.bind(ctxFor(tb))
	defer release()
	for n := 0; ; n++ {
		err := m.rec.api.unlock(lc, l.key)
		switch {
		case isNotOwner(err):
			return n
		case err != nil:
			tb.Fatalf("unlock: %v", err)
		case n > maxHolds:
			tb.Fatalf("%s is held more than %d times", l.key, maxHolds)
		}
	}
}

// lapse frees key's lock at once, as the member does when its lease runs
// out, or an operator force-unlocks it.
func (m *memberDriver) lapse(tb testing.TB, key string) {
	tb.Helper()
	if err := m.locks.ForceUnlock(ctxFor(tb), mapKey(key)); err != nil {
		tb.Fatalf("ForceUnlock: %v", err)
	}
}

// stranger takes key, which must be free, for an owner outside the driver,
// for lease, and returns that owner's lock context.
func (m *memberDriver) stranger(tb testing.TB, key string, lease time.Duration) context.Context {
	tb.Helper()
	lc := hazelcast.NewLockContext(context.Background())
	ok, err := m.locks.TryLockWithLease(lc, mapKey(key), lease)
	if err != nil || !ok {
		tb.Fatalf("the stranger's TryLock: %t, %v", ok, err)
	}
	return lc
}

// heldOnceBy reports whether the owner of lc holds key exactly once, and
// frees it.
func (m *memberDriver) heldOnceBy(tb testing.TB, lc context.Context, key string) bool {
	tb.Helper()
	if err := m.locks.Unlock(lc, mapKey(key)); err != nil {
		return false
	}
	return isNotOwner(m.locks.Unlock(lc, mapKey(key)))
}

// setFence stores v as key's fencing counter.
func (m *memberDriver) setFence(tb testing.TB, key string, v int64) {
	tb.Helper()
	if err := m.fences.Set(ctxFor(tb), mapKey(key), v); err != nil {
		tb.Fatalf("set the fencing counter: %v", err)
	}
}

// call is one call of the driver to the member.
type call struct {
	op    string // tryLock, unlock, fence, initFence, advanceFence
	key   string
	owner *owner
	wait  time.Duration
}

// recorder is the Driver's api over a real member, recording every call and
// able to make a call lose its answer after the member applied it (as when
// the connection breaks after the request went out): faults injected in the
// client, never a server of its own. It fails the test when a lock call
// comes without an owner of the driver (the client's shared lock ID 0).
type recorder struct {
	api
	tb testing.TB

	mu       sync.Mutex
	calls    []call
	after    func(c call) error // after the call was applied; non-nil: its answer
	inFlight int
	idle     *sync.Cond
	waiting  chan call // every tryLock that waits on the member, as it is sent
}

func newRecorder(tb testing.TB, a api) *recorder {
	r := &recorder{api: a, tb: tb, waiting: make(chan call, 64)}
	r.idle = sync.NewCond(&r.mu)
	return r
}

func (r *recorder) begin(ctx context.Context, c call, lock bool) call {
	if lock {
		if c.owner = ownerOf(ctx); c.owner == nil {
			r.tb.Errorf("%s without a lock owner of the driver: it would use the client's shared lock ID 0", c.op)
		}
	}
	r.mu.Lock()
	r.inFlight++
	r.mu.Unlock()
	if c.op == "tryLock" && c.wait > 0 {
		select {
		case r.waiting <- c:
		default:
		}
	}
	return c
}

// end records c and returns the answer's error, err or the injected one.
func (r *recorder) end(c call, err error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
	if r.inFlight--; r.inFlight == 0 {
		r.idle.Broadcast()
	}
	if err == nil && r.after != nil {
		return r.after(c)
	}
	return err
}

func (r *recorder) tryLock(ctx context.Context, key string, lease, wait time.Duration) (bool, error) {
	c := r.begin(ctx, call{op: "tryLock", key: key, wait: wait}, true)
	ok, err := r.api.tryLock(ctx, key, lease, wait)
	if err = r.end(c, err); err != nil {
		return false, err
	}
	return ok, nil
}

func (r *recorder) unlock(ctx context.Context, key string) error {
	c := r.begin(ctx, call{op: "unlock", key: key}, true)
	return r.end(c, r.api.unlock(ctx, key))
}

func (r *recorder) fence(ctx context.Context, key string) (int64, bool, error) {
	c := r.begin(ctx, call{op: "fence", key: key}, false)
	v, ok, err := r.api.fence(ctx, key)
	if err = r.end(c, err); err != nil {
		return 0, false, err
	}
	return v, ok, nil
}

func (r *recorder) initFence(ctx context.Context, key string, v int64) (bool, error) {
	c := r.begin(ctx, call{op: "initFence", key: key}, false)
	ok, err := r.api.initFence(ctx, key, v)
	if err = r.end(c, err); err != nil {
		return false, err
	}
	return ok, nil
}

func (r *recorder) advanceFence(ctx context.Context, key string, old, v int64) (bool, error) {
	c := r.begin(ctx, call{op: "advanceFence", key: key}, false)
	ok, err := r.api.advanceFence(ctx, key, old, v)
	if err = r.end(c, err); err != nil {
		return false, err
	}
	return ok, nil
}

// ops returns the operations of the calls since the n-th, and how many
// calls there have been.
func (r *recorder) ops(since int) ([]string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ops []string
	for _, c := range r.calls[min(since, len(r.calls)):] {
		ops = append(ops, c.op)
	}
	return ops, len(r.calls)
}

// settle waits until no call is in flight.
func (r *recorder) settle() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.inFlight > 0 {
		r.idle.Wait()
	}
}

// lastWait returns the wait of the latest tryLock that waited.
func (r *recorder) lastWait() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.calls) - 1; i >= 0; i-- {
		if c := r.calls[i]; c.op == "tryLock" && c.wait > 0 {
			return c.wait
		}
	}
	return 0
}

// setAfter installs the lost-answer fault: after is called once each call
// was applied, and a non-nil error it returns is the call's answer.
func (r *recorder) setAfter(after func(c call) error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.after = after
}

// queued waits until r sent a tryLock that waits on the member.
func queued(tb testing.TB, r *recorder) call {
	tb.Helper()
	select {
	case c := <-r.waiting:
		return c
	case <-ctxFor(tb).Done():
		tb.Fatal("no tryLock came to wait on the member")
		return call{}
	}
}
