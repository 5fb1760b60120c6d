package redis

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/conformance"
	"github.com/dlock-go/dlock/doctor"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// TestSentinel runs everything Sentinel against a master with 2 replicas
// and 3 sentinels, started for this test only: the conformance suite, the
// replica acknowledgements, then a failover under load (last, since it
// changes the master).
func TestSentinel(t *testing.T) {
	server.Need(t)
	if !server.Faults() {
		t.Skip("Sentinel tests start containers of their own; the package runs against an external server")
	}
	s := &sentinelEnv{r: testserver.Own(t, testserver.StartTimeout, func(ctx context.Context) (*testserver.RedisSentinel, error) {
		return testserver.StartRedisSentinel(ctx, 2, 3)
	})}
	t.Run("Conformance", s.testConformance)
	t.Run("ReplicaAcks", s.testReplicaAcks)
	t.Run("Doctor", s.testDoctor)
	t.Run("Election", func(t *testing.T) {
		checkElection(t, func(t *testing.T) driver.Driver {
			d, err := openSentinel(ctxFor(t), s.url(t, ""))
			if err != nil {
				t.Fatal(err)
			}
			return d
		})
	})
	t.Run("FailoverUnderLoad", s.testFailoverUnderLoad)
}

type sentinelEnv struct{ r *testserver.RedisSentinel }

// url is the deployment's URL with the query params added.
func (s *sentinelEnv) url(t *testing.T, params string) *url.URL {
	raw := s.r.URL()
	if params != "" {
		raw += "?" + params
	}
	return testkit.URL(t, raw)
}

// tamper is the Harness.Tamper of the deployment: on the master the
// sentinels name now, through a client of that call only. (A failover
// client kept for the whole suite would start its sentinel watch in the
// first case that uses it, whose leak check would take it for that case's.)
func (s *sentinelEnv) tamper(ctx context.Context, key string, overwrite bool) error {
	m, err := s.r.Master(ctx)
	if err != nil {
		return err
	}
	c := goredis.NewClient(&goredis.Options{Addr: s.r.Data[m].Addr(), MaintNotificationsConfig: maintOff()})
	defer c.Close()
	return tamper(c)(ctx, key, overwrite)
}

// client returns a dlock Client over the deployment's URL with params,
// closed when t ends.
func (s *sentinelEnv) client(t *testing.T, params string, opts ...dlock.Option) *dlock.Client {
	t.Helper()
	d, err := openSentinel(ctxFor(t), s.url(t, params))
	if err != nil {
		t.Fatal(err)
	}
	c, err := dlock.New(d, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func (s *sentinelEnv) testConformance(t *testing.T) {
	u := s.url(t, "")
	conformance.Run(t, conformance.Harness{
		NewDriver: func(ctx context.Context) (driver.Driver, error) { return openSentinel(ctx, u) },
		TTL:       suiteTTL,
		Tamper:    s.tamper,
		// The partition cases cut one client off from the sentinels and
		// the master alike.
		NewLinkedDriver: linkedOpener(t, u, func(ctx context.Context, u *url.URL, dial dialer) (driver.Driver, error) {
			opt, o, err := parseSentinelURL(u)
			if err == nil {
				opt.Dialer = dial
				return openOwned(ctx, u, goredis.NewFailoverClient(opt), o)
			}
			return nil, err
		}),
		Faults: s.r.FaultHooks(),
		// Waiting clients queue beside the lock, on the master.
		ClientsServedInOrder: true,
	})
}

// With replica_acks at the number of replicas, grants, renewals and
// releases work; asked for more replicas than there are, a grant fails with
// ErrNotReplicated within the WAIT timeout and leaves the lock free.
func (s *sentinelEnv) testReplicaAcks(t *testing.T) {
	ctx := ctxFor(t)
	key := testkit.Key(t)
	acked := s.client(t, "replica_acks=2", dlock.WithTTL(2*time.Second))
	m, err := acked.Mutex(key)
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatalf("Lock with 2 replicas acknowledging: %v", err)
	}
	if err := l.Extend(ctx); err != nil {
		t.Fatalf("Extend with 2 replicas acknowledging: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	// A semaphore's permit, through AcquireAny, waits for them too.
	sem, err := acked.Semaphore(key+"/sem", 2)
	if err != nil {
		t.Fatal(err)
	}
	p, err := sem.TryAcquire(ctx)
	if err != nil {
		t.Fatalf("TryAcquire of a permit with 2 replicas acknowledging: %v", err)
	}
	if err := p.Unlock(ctx); err != nil {
		t.Fatalf("Unlock of the permit: %v", err)
	}

	d, err := openSentinel(ctx, s.url(t, "replica_acks=3&replica_ack_timeout=100ms"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	_, err = d.Acquire(ctx, testkit.Request(key, 2*time.Second))
	if !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("Acquire with 3 replicas asked of 2: %v, want ErrNotReplicated", err)
	}
	if !isTransient(err) {
		t.Errorf("ErrNotReplicated is not transient: %v", err)
	}
	// The grant was released: another client gets the lock at once.
	plain, err := openSentinel(ctx, s.url(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = plain.Close() })
	mustRelease(t, mustAcquire(t, plain.(*Driver), testkit.Request(key, 2*time.Second)))

	// AcquireAny gives its grant back the same way.
	keys := []string{key + "/any/0", key + "/any/1"}
	if _, _, err := d.(*Driver).AcquireAny(ctx, anyRequests(keys, 2*time.Second)); !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("AcquireAny with 3 replicas asked of 2: %v, want ErrNotReplicated", err)
	}
	for _, k := range keys {
		mustRelease(t, mustAcquire(t, plain.(*Driver), testkit.Request(k, 2*time.Second)))
	}
}

// isTransient reports whether err has a Transient method saying so, as
// the core looks for.
func isTransient(err error) bool {
	t, ok := errors.AsType[interface {
		error
		Transient() bool
	}](err)
	return ok && t.Transient()
}

// The master freezes while clients hold and contend for locks (with
// replica acknowledgements) and others hold locks without them; the
// sentinels promote a replica. Every Lock and Unlock returns, no two
// acknowledged holders overlap, every unacknowledged lease that survives
// is really held on the new master (or is reported lost within its TTL),
// and every client gets locks on the new master.
func (s *sentinelEnv) testFailoverUnderLoad(t *testing.T) {
	old, err := s.r.WaitSettled(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 2 * time.Second
	keys := []string{testkit.Key(t) + "/0", testkit.Key(t) + "/1"}
	load := newContention(t, keys, 4, func() *dlock.Client { return s.client(t, "replica_acks=2", dlock.WithTTL(ttl)) })

	// Long holders without acknowledgements, across the failover.
	plain := s.client(t, "", dlock.WithTTL(ttl))
	var long []dlock.Lease
	for i := range 3 {
		m, err := plain.Mutex(fmt.Sprintf("%s/long%d", testkit.Key(t), i))
		if err != nil {
			t.Fatal(err)
		}
		l, err := m.Lock(ctxFor(t))
		if err != nil {
			t.Fatal(err)
		}
		long = append(long, l)
	}

	load.waitGrants(t, 5, "before the failover")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := s.r.Data[old].Pause(ctx); err != nil {
		t.Fatal(err)
	}
	for {
		if m, err := s.r.Master(ctx); err == nil && m != old {
			break
		}
		select {
		case <-ctx.Done():
			_ = s.r.Data[old].Resume(context.Background())
			t.Fatal("the sentinels did not promote a replica within 2 minutes")
		case <-time.After(100 * time.Millisecond):
		}
	}
	// The old master comes back as a replica of the new one, which then
	// has 2 replicas again to acknowledge grants.
	if err := s.r.Data[old].Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.r.WaitSettled(ctx); err != nil {
		t.Fatal(err)
	}
	load.waitGrants(t, 3, "on the new master")
	load.stop(t)

	other := s.client(t, "", dlock.WithTTL(ttl))
	for _, l := range long {
		m, err := other.Mutex(l.Key())
		if err != nil {
			t.Fatal(err)
		}
		l2, err := m.TryLock(ctxFor(t))
		if errors.Is(err, dlock.ErrLocked) {
			continue // still held on the new master
		}
		if err != nil {
			t.Fatal(err)
		}
		// The hold did not survive the failover: the holder must learn
		// of it by its next renewal, within its TTL.
		select {
		case <-l.Done():
			if !errors.Is(l.Err(), dlock.ErrLockLost) {
				t.Errorf("a long lease ended with %v, want ErrLockLost", l.Err())
			}
		case <-time.After(ttl + 10*time.Second):
			t.Errorf("%s: granted to another client, and its holder was not told within %v", l.Key(), ttl+10*time.Second)
		}
		_ = l2.Unlock(ctxFor(t))
	}
}

// contention is clients taking turns on keys: each worker loops Lock, a
// short hold, Unlock, and records what it held when.
type contention struct {
	keys   []string
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	grants []int // per worker
	holds  []heldSpan
	errs   []error
}

// heldSpan is one lease a worker held, from Lock's return to Unlock's call.
type heldSpan struct {
	worker     int
	key        string
	from, to   time.Time
	unlockErr  error
	lostBefore bool // the lease had ended (lost) before Unlock
}

// newContention starts workers workers, each with a Client of its own from
// newClient, over keys (worker i on keys[i%len(keys)]).
func newContention(t *testing.T, keys []string, workers int, newClient func() *dlock.Client) *contention {
	ctx, cancel := context.WithCancel(context.Background())
	c := &contention{keys: keys, cancel: cancel, grants: make([]int, workers)}
	for i := range workers {
		m, err := newClient().Mutex(keys[i%len(keys)])
		if err != nil {
			t.Fatal(err)
		}
		c.wg.Go(func() { c.work(ctx, i, m) })
	}
	t.Cleanup(func() { c.cancel(); c.wg.Wait() })
	return c
}

// lockBound bounds one Lock of a worker: far past any failover, so that a
// Lock that outlives it has hung.
const lockBound = 90 * time.Second

func (c *contention) work(ctx context.Context, i int, m dlock.Mutex) {
	for ctx.Err() == nil {
		lctx, cancel := context.WithTimeout(ctx, lockBound)
		l, err := m.Lock(lctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				c.fail(fmt.Errorf("worker %d: Lock: %w", i, err))
			}
			continue
		}
		h := heldSpan{worker: i, key: m.Key(), from: time.Now()}
		select {
		case <-time.After(20 * time.Millisecond): // the work under the lock
		case <-l.Done():
		}
		h.lostBefore = l.Err() != nil
		h.to = time.Now()
		uctx, cancel := context.WithTimeout(context.Background(), lockBound)
		h.unlockErr = l.Unlock(uctx)
		cancel()
		// An Unlock may fail while the master is down (the lock then ends
		// by its TTL): only a hang breaks a promise.
		if took := time.Since(h.to); took >= lockBound {
			c.fail(fmt.Errorf("worker %d: Unlock took %v: %v", i, took, h.unlockErr))
		}
		c.mu.Lock()
		c.holds = append(c.holds, h)
		c.grants[i]++
		c.mu.Unlock()
	}
}

func (c *contention) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs = append(c.errs, err)
}

// waitGrants waits until every worker has had n more grants than now.
func (c *contention) waitGrants(t *testing.T, n int, when string) {
	t.Helper()
	c.mu.Lock()
	start := append([]int(nil), c.grants...)
	c.mu.Unlock()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		c.mu.Lock()
		short := -1
		for i, g := range c.grants {
			if g < start[i]+n {
				short = i
			}
		}
		c.mu.Unlock()
		if short == -1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker %d had fewer than %d grants %s within 2 minutes", short, n, when)
		}
		time.Sleep(50 * time.Millisecond) // polling a counter, not synchronising
	}
}

// stop ends the workers, waits for them (bounded: a worker stuck past it
// has hung), and reports their errors and every overlap of two holds of a
// key that neither saw lost.
func (c *contention) stop(t *testing.T) {
	t.Helper()
	c.cancel()
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * lockBound):
		t.Fatalf("workers did not return within %v of being stopped", 2*lockBound)
	}
	for _, err := range c.errs {
		t.Error(err)
	}
	if n := c.overlaps(); n > 0 {
		t.Errorf("%d overlapping holds of a key", n)
	}
}

// overlaps counts the pairs of holds of one key, by different workers,
// whose times overlap.
func (c *contention) overlaps() int {
	n := 0
	for i, a := range c.holds {
		for _, b := range c.holds[i+1:] {
			if a.key == b.key && a.worker != b.worker && a.from.Before(b.to) && b.from.Before(a.to) {
				n++
			}
		}
	}
	return n
}

// The doctor follows a Sentinel URL to the master, and reports its replicas
// as a failover window unless the URL makes grants wait for them.
func (s *sentinelEnv) testDoctor(t *testing.T) {
	hasReplicaHazard := func(params string) bool {
		r := testkit.Diagnose(t, s.url(t, params).String(), 0)
		if len(r.Skipped) > 0 {
			t.Errorf("checks skipped: %+v", r.Skipped)
		}
		return slices.ContainsFunc(r.Findings, func(f doctor.Finding) bool { return f.Check == checkReplicas })
	}
	if !hasReplicaHazard("") {
		t.Error("a master with 2 replicas and no acknowledgements asked for: no replicas hazard")
	}
	if hasReplicaHazard("replica_acks=2") {
		t.Error("with replica_acks=2: a replicas hazard")
	}
}
