package conformance

import (
	"errors"
	"sync"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// testLossReports checks the contract of a lease's own loss reports
// (driver.Lease.OnLoss) on the driver directly, since the core forgives a
// driver that breaks it: a report comes at most once and says why, and a
// lease reports nothing once released, not even when its driver closes (the
// core has let the lease go by then). A driver whose leases report nothing
// (driver.NoReports) passes.
func testLossReports(t *T, e *env) {
	d := e.driver(t)
	ctx := t.Context()
	key := e.key("loss")
	// Nothing renews held: its TTL must outlast the steps before Tamper
	// (on a loaded machine, more than one suite TTL), so that the loss it
	// reports is the tampering's, not its expiry.
	held, err := d.Acquire(ctx, e.request(key, 10*e.ttl))
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	heldLog := listen(held)
	released, err := d.Acquire(ctx, e.request(e.key("loss-released"), e.ttl))
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	releasedLog := listen(released)
	if err := released.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if e.h.Tamper != nil {
		// The lock goes behind the holder's back; the lease learns of it
		// by itself or, at the latest, from an Extend.
		if err := e.h.Tamper(ctx, key, false); err != nil {
			t.Fatalf("Tamper: %v", err)
		}
		waitFor(t, e.ttl+e.slack, "Extend finding the tampered lock gone", func() bool {
			return errors.Is(held.Extend(ctx, e.ttl), driver.ErrNotHeld)
		})
	}
	_ = d.Close() // may report the held lease lost, if nothing did yet
	// A report that Close causes comes soon after it; by then the released
	// lease would have been told too, if its driver told it.
	select {
	case <-heldLog.first:
	case <-time.After(e.slack):
	}
	for name, log := range map[string]*lossLog{"held": heldLog, "released": releasedLog} {
		reasons := log.reasons()
		if len(reasons) > 1 {
			t.Errorf("the %s lease reported its loss %d times (%v), want at most once", name, len(reasons), reasons)
		}
		for _, r := range reasons {
			if r == nil {
				t.Errorf("the %s lease reported a loss without a reason", name)
			}
		}
	}
	if reasons := releasedLog.reasons(); len(reasons) > 0 {
		t.Errorf("the released lease reported a loss after Release: %v", reasons)
	}
	if len(heldLog.reasons()) == 0 {
		t.Logf("the held lease reported no loss of its own: the driver reports none (driver.NoReports), or leaves it to Extend")
	}
}

// lossLog records the loss reports of one lease, as the core would receive
// them.
type lossLog struct {
	mu    sync.Mutex
	got   []error
	first chan struct{} // closed at the first report
}

// listen starts recording l's loss reports, the way the core listens: by
// Lease.OnLoss, once, right after the grant.
func listen(l driver.Lease) *lossLog {
	log := &lossLog{first: make(chan struct{})}
	l.OnLoss(log.add)
	return log
}

func (log *lossLog) add(reason error) {
	log.mu.Lock()
	defer log.mu.Unlock()
	log.got = append(log.got, reason)
	if len(log.got) == 1 {
		close(log.first)
	}
}

func (log *lossLog) reasons() []error {
	log.mu.Lock()
	defer log.mu.Unlock()
	return append([]error(nil), log.got...)
}
