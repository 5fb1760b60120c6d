package redis

import (
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

// One pipelined batch reports each lease's own outcome, and survives the
// server forgetting its scripts.
func TestExtendBatch(t *testing.T) {
	rdb := newRDB(t)
	d := newTestDriver(t, rdb)
	ctx := ctxFor(t)
	var leases []driver.Lease
	var ttls []time.Duration
	for range 5 {
		l, err := d.Acquire(ctx, driver.Request{Key: testkit.Key(t), ID: testkit.NewID(), TTL: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
		ttls = append(ttls, 30*time.Second)
	}
	stolen := leases[2].(*lease)
	if err := rdb.Set(ctx, stolen.names.lock, "stranger", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	errs := d.ExtendBatch(ctx, leases, ttls)
	for i, err := range errs {
		switch {
		case i == 2 && !errors.Is(err, driver.ErrNotHeld):
			t.Errorf("stolen lease: got %v, want ErrNotHeld", err)
		case i != 2 && err != nil:
			t.Errorf("lease %d: %v", i, err)
		}
	}
	for i, l := range leases {
		pttl, err := rdb.PTTL(ctx, l.(*lease).names.lock).Result()
		if err != nil {
			t.Fatal(err)
		}
		if i == 2 && pttl > 0 {
			t.Errorf("the stranger's lock got an expiry %v from a stale batch", pttl)
		}
		if i != 2 && pttl < 20*time.Second {
			t.Errorf("lease %d: PTTL %v after extending to 30s", i, pttl)
		}
	}
	if v, _ := rdb.Get(ctx, stolen.names.lock).Result(); v != "stranger" {
		t.Errorf("the stranger's lock holds %q after the batch", v)
	}
}
