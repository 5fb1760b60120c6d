package hazelcast

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// THIS IS NOT HAZELCAST, and no test that uses it is a test of the backend.
//
// fakeMember is an in-process model of the five calls the driver makes (the
// api interface), written from the semantics of Hazelcast's map locks
// (com.hazelcast.internal.locksupport.LockResourceImpl): per-owner reentrant
// counts, a lease set again by every entry, owner-checked unlocks, and waits
// that the member serves on its own, whatever becomes of the caller. It
// exists only to unit-test the driver's own bookkeeping (hold counts,
// ownership, cleanup after unknown outcomes and cancelled waits) on machines
// without a Hazelcast member, and it proves nothing about a real one. The
// driver's backend tests are TestConformance and the tests named *Member,
// which run against a real cluster (see main_test.go).
//
// Unlike a member it ends leases exactly, and it fails the test when a lock
// call comes without an owner of the driver (the client's shared lock ID 0).
type fakeMember struct {
	t testing.TB

	mu      sync.Mutex
	locks   map[string]*fakeLock
	fences  map[string]int64
	changed chan struct{} // closed and replaced whenever a lock is freed
	calls   []fakeCall
	serving int        // tryLocks the member is serving
	idle    *sync.Cond // signalled when serving drops to 0

	// lost, when set, is called after a call was applied: a non-nil error
	// is returned instead of the answer, as when the answer is lost.
	lost func(c fakeCall) error
	// waiting receives every tryLock that starts waiting on the member.
	waiting chan fakeCall
}

type fakeLock struct {
	owner   *owner
	count   int
	expires time.Time
}

type fakeCall struct {
	op    string // tryLock, unlock, fence, initFence, advanceFence
	key   string
	owner *owner
	lease time.Duration
	wait  time.Duration
}

var _ api = (*fakeMember)(nil)

func newFakeMember(t testing.TB) *fakeMember {
	f := &fakeMember{
		t:       t,
		locks:   map[string]*fakeLock{},
		fences:  map[string]int64{},
		changed: make(chan struct{}),
		waiting: make(chan fakeCall, 64),
	}
	f.idle = sync.NewCond(&f.mu)
	return f
}

// ownerFor returns the owner of a lock call's context, failing the test when
// there is none: the driver must never lock with the client's shared ID 0.
func (f *fakeMember) ownerFor(ctx context.Context, op string) *owner {
	o := ownerOf(ctx)
	if o == nil {
		f.t.Errorf("fake member: %s without a lock owner of the driver: it would use the client's shared lock ID 0", op)
	}
	return o
}

// record logs c and applies the lost-answer fault. Callers hold f.mu.
func (f *fakeMember) record(c fakeCall) error {
	f.calls = append(f.calls, c)
	if f.lost != nil {
		return f.lost(c)
	}
	return nil
}

// state returns key's live lock, freeing it first if its lease ended.
// Callers hold f.mu.
func (f *fakeMember) state(key string) *fakeLock {
	l := f.locks[key]
	if l != nil && !time.Now().Before(l.expires) {
		f.free(key)
		return nil
	}
	return l
}

// free removes key's lock and wakes waiters. Callers hold f.mu.
func (f *fakeMember) free(key string) {
	delete(f.locks, key)
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeMember) tryLock(ctx context.Context, key string, lease, wait time.Duration) (bool, error) {
	o := f.ownerFor(ctx, "tryLock")
	c := fakeCall{op: "tryLock", key: key, owner: o, lease: lease, wait: wait}
	// The member serves the call on its own: the caller's context only
	// decides whether the caller is still there for the answer.
	answer := make(chan struct {
		ok  bool
		err error
	}, 1)
	f.mu.Lock()
	f.serving++
	f.mu.Unlock()
	go func() {
		ok := f.serveTryLock(c)
		f.mu.Lock()
		err := f.record(c)
		if f.serving--; f.serving == 0 {
			f.idle.Broadcast()
		}
		f.mu.Unlock()
		answer <- struct {
			ok  bool
			err error
		}{ok, err}
	}()
	select {
	case a := <-answer:
		if a.err != nil {
			return false, a.err
		}
		return a.ok, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

func (f *fakeMember) serveTryLock(c fakeCall) bool {
	deadline := time.Now().Add(c.wait)
	announced := false
	f.mu.Lock()
	defer f.mu.Unlock()
	for {
		l := f.state(c.key)
		switch {
		case l == nil:
			f.locks[c.key] = &fakeLock{owner: c.owner, count: 1, expires: time.Now().Add(c.lease)}
			return true
		case l.owner == c.owner:
			l.count++
			l.expires = time.Now().Add(c.lease)
			return true
		case c.wait <= 0 || !time.Now().Before(deadline):
			return false
		}
		if !announced {
			announced = true
			select {
			case f.waiting <- c:
			default:
			}
		}
		changed, until := f.changed, min(time.Until(deadline), time.Until(l.expires))
		f.mu.Unlock()
		timer := time.NewTimer(until)
		select {
		case <-changed:
		case <-timer.C:
		}
		timer.Stop()
		f.mu.Lock()
	}
}

func (f *fakeMember) unlock(ctx context.Context, key string) error {
	o := f.ownerFor(ctx, "unlock")
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	l := f.state(key)
	if l == nil || l.owner != o {
		_ = f.record(fakeCall{op: "unlock", key: key, owner: o})
		return fmt.Errorf("fake member: current thread is not owner of the lock: %w", errNotOwner)
	}
	l.count--
	if l.count == 0 {
		f.free(key)
	}
	return f.record(fakeCall{op: "unlock", key: key, owner: o})
}

func (f *fakeMember) fence(ctx context.Context, key string) (int64, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.fences[key]
	if err := f.record(fakeCall{op: "fence", key: key}); err != nil {
		return 0, false, err
	}
	return v, ok, nil
}

func (f *fakeMember) initFence(ctx context.Context, key string, v int64) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, exists := f.fences[key]
	if !exists {
		f.fences[key] = v
	}
	return !exists, f.record(fakeCall{op: "initFence", key: key})
}

func (f *fakeMember) advanceFence(ctx context.Context, key string, old, v int64) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur, exists := f.fences[key]
	swapped := exists && cur == old
	if swapped {
		f.fences[key] = v
	}
	return swapped, f.record(fakeCall{op: "advanceFence", key: key})
}

// The test's levers and probes.

// holder returns key's owner and count, nil and 0 when it is free.
func (f *fakeMember) holder(key string) (*owner, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l := f.state(key); l != nil {
		return l.owner, l.count
	}
	return nil, 0
}

// expires returns when key's lease ends.
func (f *fakeMember) expires(key string) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l := f.state(key); l != nil {
		return l.expires
	}
	return time.Time{}
}

// lapse ends key's lease now, as the member does when it runs out or an
// operator force-unlocks it.
func (f *fakeMember) lapse(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.locks[key] != nil {
		f.free(key)
	}
}

// stranger gives key, which must be free, to a new owner for lease.
func (f *fakeMember) stranger(key string, lease time.Duration) *owner {
	f.t.Helper()
	o := newOwner("stranger")
	f.mu.Lock()
	defer f.mu.Unlock()
	if l := f.state(key); l != nil {
		f.t.Fatalf("fake member: stranger: %q is held", key)
	}
	f.locks[key] = &fakeLock{owner: o, count: 1, expires: time.Now().Add(lease)}
	return o
}

// ops returns the operations of the calls since the n-th, and how many
// calls there have been.
func (f *fakeMember) ops(since int) ([]string, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ops []string
	for _, c := range f.calls[min(since, len(f.calls)):] {
		ops = append(ops, c.op)
	}
	return ops, len(f.calls)
}

// settle waits until the member serves no tryLock: every wait has been
// answered, granted or not, whether or not its caller was still there.
func (f *fakeMember) settle() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.serving > 0 {
		f.idle.Wait()
	}
}

// lastWait returns the wait of the latest tryLock that waited.
func (f *fakeMember) lastWait() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.calls) - 1; i >= 0; i-- {
		if c := f.calls[i]; c.op == "tryLock" && c.wait > 0 {
			return c.wait
		}
	}
	return 0
}

// wipeFences forgets every fencing counter, as a restart without
// persistence does.
func (f *fakeMember) wipeFences() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.fences)
}

// setLost installs the lost-answer fault.
func (f *fakeMember) setLost(lost func(c fakeCall) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lost = lost
}
