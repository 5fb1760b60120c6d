package memcache

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

// batchFunc is an ExtendBatch under test.
type batchFunc func(ctx context.Context, leases []driver.Lease, ttls []time.Duration) []error

// The batch renewal extends every lease still held, across more than one
// pipelined chunk, and reports ErrNotHeld for exactly the lease whose item
// was taken by a stranger and the one whose item vanished, leaving the
// stranger's item as it was.
func TestExtendBatch(t *testing.T) {
	mc, sel := newMCSelAt(t, server.URL)
	d := newTestDriver(t, mc, WithSelector(sel))
	if d.Capabilities().BatchExtender == nil {
		t.Fatal("a Driver with WithSelector declares no BatchExtender")
	}
	if problems := checkBatch(t, d, mc, d.ExtendBatch, batchSize+3); len(problems) > 0 {
		for _, p := range problems {
			t.Error(p)
		}
	}
}

// A batch renewal without the owner check (a plain touch of every item, as
// a careless pipelined renewal would do) is caught by checkBatch: it
// extends the stranger's lock.
func TestExtendBatchCatchesTouch(t *testing.T) {
	mc, sel := newMCSelAt(t, server.URL)
	d := newTestDriver(t, mc, WithSelector(sel))
	touch := func(ctx context.Context, leases []driver.Lease, ttls []time.Duration) []error {
		errs := make([]error, len(leases))
		for i, dl := range leases {
			l := dl.(*lease)
			if err := mc.Touch(l.names.lock, expirySeconds(ttls[i])); err != nil {
				errs[i] = driver.ErrNotHeld
			}
		}
		return errs
	}
	if problems := checkBatch(t, d, mc, touch, 4); len(problems) == 0 {
		t.Error("checkBatch found nothing wrong with a renewal that checks no owner")
	}
}

// checkBatch acquires n leases through d, hands one of their items to a
// stranger and deletes another's, extends them all to 30 minutes with extend, and
// returns what went wrong.
func checkBatch(t *testing.T, d *Driver, mc *gomemcache.Client, extend batchFunc, n int) (problems []string) {
	ctx := setupCtx(t)
	key := testkit.Key(t)
	leases := make([]driver.Lease, n)
	ttls := make([]time.Duration, n)
	for i := range leases {
		l, err := d.Acquire(ctx, driver.Request{Key: key + "/" + strconv.Itoa(i), ID: testkit.NewID(), TTL: 5 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Release(context.Background()) })
		leases[i] = l
		ttls[i] = 30 * time.Minute
	}
	stolen, gone := leases[1].(*lease), leases[2].(*lease)
	stranger := encodeValue(holding{id: "stranger", expires: time.Now().Add(10 * time.Minute)})
	if err := mc.Set(&gomemcache.Item{Key: stolen.names.lock, Value: stranger, Expiration: 600}); err != nil {
		t.Fatal(err)
	}
	if err := mc.Delete(gone.names.lock); err != nil {
		t.Fatal(err)
	}
	errs := extend(ctx, leases, ttls)
	if len(errs) != n {
		return []string{fmt.Sprintf("%d errors for %d leases", len(errs), n)}
	}
	for i, err := range errs {
		switch {
		case (i == 1 || i == 2) && !errors.Is(err, driver.ErrNotHeld):
			problems = append(problems, fmt.Sprintf("lease %d, not held any more: got %v, want ErrNotHeld", i, err))
		case i != 1 && i != 2 && err != nil:
			problems = append(problems, fmt.Sprintf("lease %d: %v", i, err))
		}
	}
	ttlOf := func(name string) int {
		left := -2
		err := d.metaRound(ctx, mustPick(t, d, name), fmt.Appendf(nil, "mg %s t\r\n", name), 1, func(_ int, fields [][]byte, _ []byte) error {
			for _, f := range fields[1:] {
				if len(f) > 1 && f[0] == 't' {
					left, _ = strconv.Atoi(string(f[1:]))
				}
			}
			return nil
		}, func(int, error) {})
		if err != nil {
			t.Fatal(err)
		}
		return left
	}
	if left := ttlOf(stolen.names.lock); left > 600 {
		problems = append(problems, fmt.Sprintf("the stranger's lock expires in %d s after the batch, it was stored for 600 s", left))
	}
	if v, err := mc.Get(stolen.names.lock); err != nil || string(v.Value) != string(stranger) {
		problems = append(problems, fmt.Sprintf("the stranger's lock after the batch: %v, %v", v, err))
	}
	for _, i := range []int{0, n - 1} {
		if left := ttlOf(leases[i].(*lease).names.lock); left < 1200 {
			problems = append(problems, fmt.Sprintf("lease %d expires in %d s after extending it to 1800 s", i, left))
		}
	}
	return problems
}

// mustPick returns the server of the item name.
func mustPick(t *testing.T, d *Driver, name string) net.Addr {
	t.Helper()
	addr, err := d.meta.pick(name)
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// setupCtx bounds the steps of a scenario that take many requests: wide,
// for a loaded machine; it bounds a hang, not a duration.
func setupCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
