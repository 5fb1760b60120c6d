// Package conformance is the test suite every dlock driver passes.
//
// A driver's tests start a real backend (in a container, or an existing
// server), then hand the suite a Harness that makes fresh, independent
// clients of it:
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, conformance.Harness{
//			NewDriver: func(ctx context.Context) (driver.Driver, error) {
//				return mydriver.Open(ctx, serverURL)
//			},
//		})
//	}
//
// Each case is a row of a table with the rule it checks, taken from the
// documentation of package dlock and package driver. Cases needing a
// capability the driver lacks (read-write locks, reentrancy) or a hook the
// harness lacks (tampering, backend faults, links to cut) are skipped with
// the reason.
// Every case runs under a watchdog, so a broken driver fails instead of
// hanging, and is followed by a goroutine-leak check: whatever the case
// started (the core's, the driver's and its client library's goroutines)
// must have ended once it has.
//
// Some faults need no harness hook: a fault middleware between the core and
// the driver (middleware.go) delays replies, blocks renewals, delivers
// requests after their caller gave up, freezes a client past its TTL,
// holds back and duplicates wake-ups, and cancels callers as grants arrive,
// passing the driver's Capabilities on (its optional behaviours wrapped) so
// that the core drives it as it drives the bare driver. The contests (RandomDeadlines, AppliedAfterTimeout,
// SemaphoreAppliedAfterTimeout, LateNotifications) run for a few seconds; DLOCK_RANDOM_DEADLINES (a Go
// duration such as 60s) lengthens them, and they log their grants, timeouts,
// overlaps and token regressions.
//
// The suite proves its own strength: its tests run it against deliberately
// broken drivers, one per known-broken locking algorithm, and check that each
// fails the cases meant to catch it.
//
// With results.Env set to a directory, a Run that passes writes there a
// record of the driver's capabilities, the harness's hooks and each case's
// outcome (package results): the project's capability table is generated
// from these records.
package conformance

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// Harness is what a driver's tests give the suite: a way to make clients of
// the backend under test, and optionally ways to interfere with it.
type Harness struct {
	// NewDriver returns a new client of the backend, independent of every
	// other (as a client in another process would be). Required. The suite
	// closes every driver it makes.
	NewDriver func(ctx context.Context) (driver.Driver, error)

	// Name names the backend in the record Run keeps when results.Env
	// asks for one: path elements of letters, digits, '.', '_' and '-'. Default:
	// the driver's package name, followed by the test's name without its
	// "Test" prefix and "Conformance" elements ("redis/RedLock" for
	// TestRedLock/Conformance in package redis).
	Name string

	// TTL is the lease length the cases use. Default 1 s; a backend with
	// coarse expiry (whole seconds) needs more. Cases last a few TTLs.
	TTL time.Duration

	// ExpiryLag is how late the backend may free an expired lock, beyond its
	// TTL: members that expire leases in whole-second batches need about a
	// second. It widens the suite's timing bounds. Default 0.
	ExpiryLag time.Duration

	// Tamper, when set, removes the lock on key (overwrite false) or gives it
	// to a stranger (overwrite true) behind its holders' backs, as an
	// operator or a buggy client would. It enables the lost-signal cases.
	Tamper func(ctx context.Context, key string, overwrite bool) error

	// ClientsServedInOrder declares that the backend serves clients waiting
	// for one lock in the order they arrived, across clients (a queue kept
	// by the backend: ZooKeeper's and etcd's recipes, PostgreSQL's lock
	// queue), not only one Client's goroutines, which the core orders on
	// every backend. It enables the cases ClientsServedInOrder and
	// SemaphoreClientsServedInOrder, which need the driver's Inspector to
	// count the waiters (Info.Waiters), so that each client starts waiting
	// only once the one before it is queued.
	ClientsServedInOrder bool

	// Faults, when set, enables the cases that pause and restart the backend.
	Faults *Faults

	// NewLinkedDriver, when set, returns a new client like NewDriver's whose
	// every connection to the backend goes through a link of its own, which
	// the suite can cut and restore (a TCP proxy per client, such as
	// containerfaults.Proxy). It enables the partition cases. The
	// suite restores, then closes, every link it is given, after closing
	// its driver.
	NewLinkedDriver func(ctx context.Context) (driver.Driver, Link, error)

	// newSemaphore, when set, makes the semaphores of the semaphore cases
	// instead of Client.Semaphore: the self-tests' broken semaphores.
	newSemaphore semaphoreMaker
}

// Link is one client's network path to the backend, which the suite cuts
// to model a partition between that client and the backend.
type Link interface {
	// Cut silences the link in both directions: nothing that the client or
	// the backend sends is delivered any more (it is held or dropped), and
	// connections stay open, so neither side is told, as in a network
	// partition and unlike a reset. New connections get nothing through
	// either. Cutting a cut link does nothing.
	Cut(ctx context.Context) error
	// Restore lets traffic through again. Bytes the cut held may be
	// delivered now, late. Restoring a link that is not cut does nothing.
	Restore(ctx context.Context) error
	// Close ends the link and every connection through it.
	Close() error
}

// Faults are hooks that do to the whole backend what happens to servers.
type Faults struct {
	// Pause freezes the backend (docker pause): requests hang until Resume.
	Pause func(ctx context.Context) error
	// Resume undoes Pause.
	Resume func(ctx context.Context) error
	// Restart stops the backend and starts it again, losing whatever it does
	// not persist, and returns once it serves requests again.
	Restart func(ctx context.Context) error
}

// Run runs every applicable case of the suite against the harness's backend,
// each as a subtest of t named after the case. Cases that do not interfere
// with the whole backend run in parallel, on keys of their own; fault cases
// and the contests, which load the backend, run afterwards, one at a time.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.NewDriver == nil {
		t.Fatal("conformance: Harness.NewDriver is required")
	}
	if h.TTL <= 0 {
		h.TTL = time.Second
	}
	probe, err := h.NewDriver(t.Context())
	if err != nil {
		t.Fatalf("conformance: NewDriver: %v", err)
	}
	env := newEnv(h, probe)
	_ = probe.Close()

	var rec recorder
	for _, serial := range []bool{false, true} {
		group := "Cases"
		if serial {
			group = "Faults"
		}
		t.Run(group, func(t *testing.T) {
			for _, c := range cases {
				if c.serial != serial {
					continue
				}
				t.Run(c.name, func(t *testing.T) {
					if !serial {
						t.Parallel()
					}
					res := execute(env, c)
					rec.add(c.name, res)
					res.report(t, c)
				})
			}
		})
	}
	finishRecord(t, h, probe, env.caps, &rec)
}

// runNamed runs the named cases against h, concurrently, without a
// *testing.T, and returns how each ended. The suite's self-tests use it to
// show that broken drivers fail.
func runNamed(h Harness, names ...string) (map[string]result, error) {
	if h.TTL <= 0 {
		h.TTL = time.Second
	}
	probe, err := h.NewDriver(context.Background())
	if err != nil {
		return nil, err
	}
	env := newEnv(h, probe)
	_ = probe.Close()
	results := make(map[string]result, len(names))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, name := range names {
		i := slices.IndexFunc(cases, func(c testCase) bool { return c.name == name })
		if i < 0 {
			return nil, fmt.Errorf("conformance: no case named %q", name)
		}
		wg.Go(func() {
			r := execute(env, cases[i])
			mu.Lock()
			results[name] = r
			mu.Unlock()
		})
	}
	wg.Wait()
	return results, nil
}
