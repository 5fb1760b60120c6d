package conformance

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// The partition cases cut one client off from the backend through the
// harness's links (Harness.NewLinkedDriver): the client and the backend both
// stay up, their connections stay open, and nothing gets through. A holder
// that cannot be heard must lose its lock on the backend within the TTL, be
// told by its deadline, and never get it back when the link heals.

// needLinks skips the case when the harness cannot cut a client off.
func (e *env) needLinks(t *T) {
	if e.h.NewLinkedDriver == nil {
		t.Skipf("the harness has no NewLinkedDriver hook: no client's link to the backend can be cut")
	}
}

// linkedDriver makes a new client of the backend behind a link of its own.
// When the case ends the link is restored, then the driver closed, then the
// link closed.
func (e *env) linkedDriver(t *T) (driver.Driver, Link) {
	d, link, err := e.h.NewLinkedDriver(t.Context())
	if err != nil {
		t.Fatalf("NewLinkedDriver: %v", err)
	}
	t.Cleanup(func() { _ = link.Close() })
	t.Cleanup(func() { _ = d.Close() })
	t.Cleanup(func() { _ = link.Restore(context.Background()) })
	return d, link
}

// linkedClient makes a dlock.Client over a linked driver. When the case ends
// the link is restored before the client closes, so that Close can reach
// the backend.
func (e *env) linkedClient(t *T) (*dlock.Client, Link) {
	d, link := e.linkedDriver(t)
	c, err := dlock.New(d, dlock.WithTTL(e.ttl))
	if err != nil {
		t.Fatalf("dlock.New: %v", err)
	}
	t.Cleanup(func() {
		_ = link.Restore(context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), e.ttl+e.slack)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c, link
}

// cut cuts link and returns the time it returned: every request that got
// through before the cut was sent before then.
func cut(t *T, link Link) time.Time {
	if err := link.Cut(t.Context()); err != nil {
		t.Fatalf("Link.Cut: %v", err)
	}
	return time.Now()
}

func restore(t *T, link Link) {
	if err := link.Restore(t.Context()); err != nil {
		t.Fatalf("Link.Restore: %v", err)
	}
}

// pollAcquire waits until d acquires key, failing the case at until.
// An error other than ErrLocked is tried again too: d is a client in touch
// with the backend, but on a loaded machine its connection can drop and come
// back (a ZooKeeper client whose pings were starved), and a failed attempt
// leaves nothing behind; what the case checks is the grant by until.
func (e *env) pollAcquire(t *T, d driver.Driver, key string, until time.Time, what string) driver.Lease {
	var l driver.Lease
	var lastErr error
	waitFor(t, time.Until(until), what, func() bool {
		var err error
		l, err = d.Acquire(t.Context(), e.request(key, e.ttl))
		if err != nil && !errors.Is(err, driver.ErrLocked) {
			if lastErr == nil || lastErr.Error() != err.Error() {
				t.Logf("Acquire while polling for %s: %v (trying again)", what, err)
			}
			lastErr = err
		}
		return err == nil
	})
	return l
}

// afterRestore bounds a stale holder's calls once its link is back: the
// driver may have to reconnect first, and an error is as good an answer as
// ErrNotHeld (what matters is that nothing changes on the backend).
func (e *env) afterRestore(t *T) (context.Context, context.CancelFunc) {
	return contextWithTimeout(t, 2*e.ttl+e.slack)
}

func testPartitionedHolder(t *T, e *env) {
	e.needLinks(t)

	// Through the core, with renewal on.
	key := e.key("partitioned")
	ca, link := e.linkedClient(t)
	ma := e.mutex(t, ca, key)
	mb, mc := e.mutex(t, e.client(t), key), e.mutex(t, e.client(t), key)
	la := lock(t, ma)
	time.Sleep(e.ttl / 2) // hold long enough for a renewal to go through
	cutAt := cut(t, link)

	lb := lockWithin(t, mb, time.Until(cutAt.Add(e.ttl+e.slack)), "another client's Lock while the holder is cut off")
	granted := time.Now()
	select {
	case <-la.Done():
	default:
		if deadline := la.Deadline(); granted.Before(deadline) {
			t.Errorf("two holders: the lock was granted to another client (token %d) %v before the cut-off holder's deadline (token %d), and the cut-off holder was not told", lb.Token(), deadline.Sub(granted), la.Token())
		}
	}
	within(t, la.Done(), time.Until(cutAt.Add(e.ttl))+e.slack, "the cut-off holder's lost signal")
	if over := la.Deadline().Sub(cutAt.Add(e.ttl)); over > 0 {
		t.Errorf("the cut-off holder's deadline is %v past the cut plus the TTL: a renewal that never reached the backend moved it", over)
	}
	if err := la.Err(); !errors.Is(err, dlock.ErrLockLost) {
		t.Errorf("Err of the cut-off holder's lease: got %v, want ErrLockLost", err)
	}

	restore(t, link)
	actx, acancel := e.afterRestore(t)
	defer acancel()
	if err := la.Extend(actx); err == nil {
		t.Errorf("the cut-off holder's Extend after the link came back succeeded, while another client holds the lock")
	}
	if err := la.Unlock(actx); !errors.Is(err, dlock.ErrLockLost) {
		t.Errorf("the cut-off holder's Unlock after the link came back: got %v, want ErrLockLost", err)
	}
	expectLocked(t, mc, "the cut-off holder's Extend and Unlock after the link came back must leave the new holder's lock alone")
	if err := lb.Err(); err != nil {
		t.Errorf("the new holder's lease ended once the cut-off holder's link came back: %v", err)
	}
	if a, b := la.Token(), lb.Token(); a != 0 && b <= a {
		t.Errorf("fencing token of the new holder: got %d, want more than the cut-off holder's %d", b, a)
	}
	unlock(t, lb)

	// The same on the driver, where nothing in the core stands between a
	// stale lease and the backend.
	key = e.key("partitioned-driver")
	da, dlink := e.linkedDriver(t)
	db, dc := e.driver(t), e.driver(t)
	stale := e.acquire(t, da, key)
	cutAt = cut(t, dlink)
	fresh := e.pollAcquire(t, db, key, cutAt.Add(e.ttl+e.slack), "another client's grant while the holder is cut off")
	restore(t, dlink)
	actx, acancel = e.afterRestore(t)
	defer acancel()
	if err := stale.Extend(actx, e.ttl); err == nil {
		t.Errorf("the cut-off holder's driver Extend after the link came back succeeded, while another client holds the lock")
	}
	if err := stale.Release(actx); err == nil {
		t.Errorf("the cut-off holder's driver Release after the link came back succeeded, while another client holds the lock")
	}
	e.expectIntact(t, dc, key, fresh, "the cut-off holder's Extend and Release after the link came back must change nothing")
	if a, b := stale.Token(), fresh.Token(); a != 0 && b <= a {
		t.Errorf("fencing token of the new holder: got %d, want more than the cut-off holder's %d", b, a)
	}
	if err := fresh.Release(t.Context()); err != nil {
		t.Errorf("the new holder's Release: %v", err)
	}
}

// silentLocks is how many locks the silent holder holds: renewals are
// batched per client, and every one of them must go.
const silentLocks = 3

func testSilentHolder(t *T, e *env) {
	e.needLinks(t)
	ca, link := e.linkedClient(t)
	cb, cc := e.client(t), e.client(t)
	keys := make([]string, silentLocks)
	held := make([]dlock.Lease, silentLocks)
	for i := range keys {
		keys[i] = e.key("silent")
		held[i] = lock(t, e.mutex(t, ca, keys[i]))
	}
	time.Sleep(e.ttl / 2) // hold long enough for a renewal to go through
	// From now on the holder's renewals, and whatever the driver itself
	// sends (heartbeats, keep-alives), reach nobody; the holder's process
	// and its connections are alive.
	cutAt := cut(t, link)

	// Another client waits for every lock at once, so that each grant is
	// seen as soon as the backend frees the lock.
	ctx, cancel := contextWithTimeout(t, time.Until(cutAt.Add(e.ttl+e.slack)))
	defer cancel()
	fresh := make([]dlock.Lease, silentLocks)
	errs := make([]error, silentLocks)
	grantedAfter := make([]time.Duration, silentLocks)
	var wg sync.WaitGroup
	for i, key := range keys {
		m := e.mutex(t, cb, key)
		wg.Go(func() {
			fresh[i], errs[i] = m.Lock(ctx)
			grantedAfter[i] = time.Since(cutAt)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("lock %d of %d: another client's Lock: got %v, want the backend to free the silent holder's lock within the TTL (%v) of the cut plus a margin", i+1, silentLocks, err, e.ttl)
		} else {
			t.Logf("lock %d of %d granted to another client %v after the cut", i+1, silentLocks, grantedAfter[i].Round(time.Millisecond))
		}
	}
	if t.Failed() {
		for _, l := range fresh {
			if l != nil {
				_ = l.Unlock(t.Context())
			}
		}
		t.Fatalf("the backend kept a silent holder's lock")
	}

	// The new holders keep their locks while the old one stays silent, and
	// after its link heals, when whatever it sent meanwhile arrives late.
	keep := func(d time.Duration, why string) {
		end := time.Now().Add(d)
		for {
			for i, key := range keys {
				expectLocked(t, e.mutex(t, cc, key), why)
				if err := fresh[i].Err(); err != nil {
					t.Fatalf("the new holder of lock %d lost it: %v: %s", i+1, err, why)
				}
			}
			if time.Now().After(end) {
				return
			}
			time.Sleep(e.ttl / 4) // pace the checks
		}
	}
	keep(e.ttl/2, "the new holder keeps the lock while the old holder is silent")
	restore(t, link)
	keep(e.ttl, "the new holder keeps the lock once the old holder's link came back")
	for i, l := range fresh {
		if a, b := held[i].Token(), l.Token(); a != 0 && b <= a {
			t.Errorf("fencing token of the new holder: got %d, want more than the silent holder's %d", b, a)
		}
		unlock(t, l)
	}
}
