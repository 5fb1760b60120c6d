package hazelcast

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestTokensStrictlyIncrease(t *testing.T) {
	noLeaks(t)
	f := newFakeMember(t)
	da, db := newFakeDriver(t, f), newFakeDriver(t, f)
	clock := useTestClock(da)
	db.now = clock.read
	key := testKey(t)
	take := func(d *Driver) uint64 {
		t.Helper()
		l := mustAcquire(t, d, key)
		if err := l.Release(ctxFor(t)); err != nil {
			t.Fatalf("Release: %v", err)
		}
		return l.Token()
	}

	first := take(da)
	if want := uint64(clock.read().UnixMicro()); first != want {
		t.Errorf("first token %d, want the clock's microseconds %d", first, want)
	}
	// The clock has not moved: the counter does.
	if got := take(db); got != first+1 {
		t.Errorf("token on an unmoved clock: %d, want %d", got, first+1)
	}
	// A client whose clock is behind still gets a greater token.
	clock.advance(-time.Hour)
	if got := take(da); got != first+2 {
		t.Errorf("token from a clock an hour behind: %d, want %d", got, first+2)
	}
	// The counter is lost (a restart without persistence): the clock, ahead
	// of the last token, keeps tokens rising.
	clock.advance(2 * time.Hour)
	f.wipeFences()
	if got := take(db); got <= first+2 || got != uint64(clock.read().UnixMicro()) {
		t.Errorf("token after the counter was lost: %d, want the clock's %d, above %d", got, clock.read().UnixMicro(), first+2)
	}
}

func TestFenceContentionFailsCleanly(t *testing.T) {
	noLeaks(t)
	f := newFakeMember(t)
	d := newFakeDriver(t, f)
	key := testKey(t)
	f.fences[mapKey(key)] = 1
	// Something else writes the counter between every read and its
	// compare-and-set. The hook runs with f.mu held.
	f.setLost(func(c fakeCall) error {
		if c.op == "fence" {
			f.fences[c.key]++
		}
		return nil
	})
	if _, err := d.TryAcquire(ctxFor(t), request(key, testTTL)); !errors.Is(err, errFenceContended) {
		t.Fatalf("TryAcquire with a contended counter: %v, want errFenceContended", err)
	}
	if o, n := f.holder(mapKey(key)); o != nil {
		t.Fatalf("the lock was left held %d times", n)
	}
}

func TestFenceAtItsMaximum(t *testing.T) {
	noLeaks(t)
	f := newFakeMember(t)
	d := newFakeDriver(t, f)
	key := testKey(t)
	f.fences[mapKey(key)] = math.MaxInt64
	if _, err := d.TryAcquire(ctxFor(t), request(key, testTTL)); err == nil {
		t.Fatal("TryAcquire with the counter at its maximum succeeded")
	}
	if o, n := f.holder(mapKey(key)); o != nil {
		t.Fatalf("the lock was left held %d times", n)
	}
}
