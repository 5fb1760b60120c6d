package hazelcast

// Tests of the fencing counter of fence.go against the test cluster.

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testkit"
)

func TestTokensStrictlyIncrease(t *testing.T) {
	da, db := twoDrivers(t)
	clock := useTestClock(da.Driver)
	db.now = clock.read
	key := testkit.Key(t)
	take := func(d *memberDriver) uint64 {
		t.Helper()
		l := d.acquire(t, key)
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
	if err := da.fences.Delete(ctxFor(t), mapKey(key)); err != nil {
		t.Fatal(err)
	}
	if got := take(db); got <= first+2 || got != uint64(clock.read().UnixMicro()) {
		t.Errorf("token after the counter was lost: %d, want the clock's %d, above %d", got, clock.read().UnixMicro(), first+2)
	}
}

func TestFenceContentionFailsCleanly(t *testing.T) {
	testkit.NoLeaks(t)
	d := newMemberDriver(t, "")
	key := testkit.Key(t)
	d.setFence(t, key, 1)
	// Something else writes the counter between every read and its
	// compare-and-set.
	d.rec.setAfter(func(c call) error {
		if c.op == "fence" {
			v, err := d.fences.Get(ctxFor(t), c.key)
			if err != nil {
				return err
			}
			return d.fences.Set(ctxFor(t), c.key, v.(int64)+1)
		}
		return nil
	})
	if _, err := d.Acquire(ctxFor(t), testkit.Request(key, testTTL)); !errors.Is(err, errFenceContended) {
		t.Fatalf("Acquire with a contended counter: %v, want errFenceContended", err)
	}
	d.expectFree(t, key, "the lock was left held")
}

func TestFenceAtItsMaximum(t *testing.T) {
	testkit.NoLeaks(t)
	d := newMemberDriver(t, "")
	key := testkit.Key(t)
	d.setFence(t, key, math.MaxInt64)
	if _, err := d.Acquire(ctxFor(t), testkit.Request(key, testTTL)); err == nil {
		t.Fatal("Acquire with the counter at its maximum succeeded")
	}
	d.expectFree(t, key, "the lock was left held")
}
