package conformance

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/drivers/memory"
)

// Broken drivers for the partition cases, and the self-test that shows the
// cases catch them. Over the in-process backend a client's link is a gate
// (gateLink): while it is cut, every call of the client waits, as a request
// held in the network does, until the link is restored or the call's
// context ends.

// gateLink is a Link in front of one client of the memory backend.
type gateLink struct {
	mu  sync.Mutex
	cut chan struct{} // closed by Restore; nil while the link is up
}

func (g *gateLink) Cut(context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cut == nil {
		g.cut = make(chan struct{})
	}
	return nil
}

func (g *gateLink) Restore(context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cut != nil {
		close(g.cut)
		g.cut = nil
	}
	return nil
}

func (g *gateLink) Close() error { return g.Restore(context.Background()) }

// pass waits until the link lets a request through, or ctx ends: then the
// request never reached the backend.
func (g *gateLink) pass(ctx context.Context) error {
	g.mu.Lock()
	cut := g.cut
	g.mu.Unlock()
	if cut == nil {
		return nil
	}
	select {
	case <-cut:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// gatedDriver sends every call of d through link.
type gatedDriver struct {
	driver.Driver
	link *gateLink
}

func (d gatedDriver) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	if err := d.link.pass(ctx); err != nil {
		return nil, err
	}
	l, err := d.Driver.Acquire(ctx, req)
	if err != nil {
		return nil, err
	}
	return gatedLease{Lease: l, link: d.link}, nil
}

type gatedLease struct {
	driver.Lease
	link *gateLink
}

func (l gatedLease) Extend(ctx context.Context, ttl time.Duration) error {
	if err := l.link.pass(ctx); err != nil {
		return err
	}
	return l.Lease.Extend(ctx, ttl)
}

func (l gatedLease) Release(ctx context.Context) error {
	if err := l.link.pass(ctx); err != nil {
		return err
	}
	return l.Lease.Release(ctx)
}

// linkedHarness is brokenHarness with links. The gate sits between the
// memory driver and the plainDriver that make breaks, where the network is
// between a driver and its server: the broken algorithm sees its requests
// go unanswered.
func linkedHarness(make func(b *memory.Backend, d *plainDriver, n int64) driver.Driver) Harness {
	h := brokenHarness(make)
	b := memory.NewBackend()
	var clients atomic.Int64
	newDriver := func(link *gateLink) driver.Driver {
		d := &plainDriver{Driver: gatedDriver{Driver: memory.New(b), link: link}, b: b}
		return make(b, d, clients.Add(1))
	}
	h.NewDriver = func(context.Context) (driver.Driver, error) {
		return newDriver(&gateLink{}), nil // never cut
	}
	h.NewLinkedDriver = func(context.Context) (driver.Driver, Link, error) {
		link := &gateLink{}
		return newDriver(link), link, nil
	}
	return h
}

// A renewal whose outcome is unknown taken as a success: an Extend that gets
// no answer before its context ends reports the lock extended. A holder cut
// off from the backend then goes on believing it holds the lock, and moves
// its deadline, while the backend has let the lock expire and granted it to
// another client.
var renewalAssumedOnTimeout = leasesAs(func(l *plainLease) driver.Lease { return &optimisticRenewal{l} })

type optimisticRenewal struct{ *plainLease }

func (l *optimisticRenewal) Extend(ctx context.Context, ttl time.Duration) error {
	err := l.plainLease.Extend(ctx, ttl)
	if err != nil && ctx.Err() != nil {
		return nil // no answer in time: assume it went through
	}
	return err
}

// A lock that lives as long as its holder's connection, with nothing on the
// backend to end a connection that goes silent: an advisory lock on a
// database session without an idle-session timeout or keep-alive, an
// ephemeral node of a session that never times out. A holder that vanishes
// (its connection closes) frees the lock; a silent one keeps it forever.
func sessionWithoutIdleTimeout(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	s := &sessionDriver{plainDriver: d, held: map[*sessionLease]struct{}{}}
	d.acquire = func(ctx context.Context, d *plainDriver, req driver.Request) (driver.Lease, error) {
		forever := req
		forever.TTL = 24 * time.Hour // the session's lifetime, not the TTL
		return d.Driver.Acquire(ctx, forever)
	}
	d.lease = func(l *plainLease) driver.Lease {
		sl := &sessionLease{plainLease: l, s: s}
		s.mu.Lock()
		s.held[sl] = struct{}{}
		s.mu.Unlock()
		return sl
	}
	return s
}

type sessionDriver struct {
	*plainDriver
	mu   sync.Mutex
	held map[*sessionLease]struct{}
}

// Close ends the session: the backend frees its locks.
func (s *sessionDriver) Close() error {
	s.mu.Lock()
	held := s.held
	s.held = map[*sessionLease]struct{}{}
	s.mu.Unlock()
	for l := range held {
		_ = l.plainLease.Release(context.Background())
	}
	return s.plainDriver.Close()
}

type sessionLease struct {
	*plainLease
	s *sessionDriver
}

// Validity reports the TTL the client asked for, which the session ignores.
func (l *sessionLease) Validity() time.Duration { return l.req.TTL }

// Extend is a heartbeat: it keeps the session, and the lock, alive.
func (l *sessionLease) Extend(ctx context.Context, _ time.Duration) error {
	return l.plainLease.Extend(ctx, 24*time.Hour)
}

func (l *sessionLease) Release(ctx context.Context) error {
	l.s.mu.Lock()
	delete(l.s.held, l)
	l.s.mu.Unlock()
	return l.plainLease.Release(ctx)
}

// TestSuiteCatchesPartitionBrokenDrivers is TestSuiteCatchesBrokenDrivers
// for the partition cases, whose harness has links.
func TestSuiteCatchesPartitionBrokenDrivers(t *testing.T) {
	type maker = func(*memory.Backend, *plainDriver, int64) driver.Driver
	for _, tc := range []struct {
		name     string
		broken   maker
		caughtBy []string
	}{
		{"renewal of unknown outcome taken as done", renewalAssumedOnTimeout, []string{"PartitionedHolder"}},
		{"session lock without idle timeout", sessionWithoutIdleTimeout, []string{"SilentHolder"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			expectCaught(t, linkedHarness(tc.broken), linkedHarness(unbroken), tc.caughtBy...)
		})
	}
}

// TestPartitionCasesSkipWithoutLinks checks that a harness without
// NewLinkedDriver skips the partition cases, saying why.
func TestPartitionCasesSkipWithoutLinks(t *testing.T) {
	results, err := runNamed(brokenHarness(unbroken), "PartitionedHolder", "SilentHolder")
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range results {
		if r.failed || !strings.Contains(r.skipped, "NewLinkedDriver") {
			t.Errorf("case %s without links: failed %v, skipped %q; want skipped for want of NewLinkedDriver", name, r.failed, r.skipped)
		}
	}
}
