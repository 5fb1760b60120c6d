package memcache

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/leasekit"
)

// lease is one lock held on memcached: the lock item holds id until it
// expires, is released, is evicted, or someone tampers with it. memcached
// does not tell a holder of its loss: the next Extend finds it.
type lease struct {
	driver.NoReports
	// Grant holds the fencing token drawn when the lock was granted, and
	// the validity of the latest grant or extension: the TTL rounded up to
	// whole seconds, minus 2.1 s for memcached's clock (see "Guarantees" in
	// the package documentation).
	leasekit.Grant
	d     *Driver
	names names
	id    string
	value string // the hold's Request.Value, written again by every renewal

	mu   sync.Mutex
	last written // the last write's connection and CAS unique (metacas.go), if known
}

// lastWrite returns where the lease's last write went, and its CAS unique.
func (l *lease) lastWrite() written {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

// setLastWrite records where the lease's last write went (the zero value:
// unknown).
func (l *lease) setLastWrite(w written) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last = w
}

// held is what the lease's renewals write into its lock item: its request
// ID, and its fencing token and value, so that an Inspect reads them with
// the holder (after the first renewal, for a lock without a value; see
// Driver.Inspect).
func (l *lease) held() holding {
	return holding{id: l.id, token: l.Token(), value: l.value}
}

var _ driver.Lease = (*lease)(nil)

// Extend pushes the lock item's expiry to ttl from now, if it still holds
// this lease's ID, by a compare-and-swap: on the CAS unique of the lease's
// last write when it is known (metacas.go), else on the value read;
// otherwise it changes nothing and returns ErrNotHeld.
func (l *lease) Extend(ctx context.Context, ttl time.Duration) error {
	if err := checkTTL(ttl); err != nil {
		return fmt.Errorf("memcached: TTL %w", err)
	}
	secs := expirySeconds(ttl)
	return l.d.async(ctx, func() error {
		if err := l.extend(secs); err != nil {
			return err
		}
		l.SetValidity(validityOf(secs))
		return nil
	})
}

// extend rewrites the lock item with expiry secs if it is still the lease's:
// in one round trip when the CAS unique of its last write is known and
// still the item's, else by reading it (cas.go).
func (l *lease) extend(secs int32) error {
	if handled, err := l.extendMeta(context.Background(), secs); handled {
		return err
	}
	return l.d.extend(l.names, l.held(), secs)
}

// Release removes the lock item, if it still holds this lease's ID: by a
// compare-and-delete on the CAS unique of the lease's last write when it is
// known (metacas.go), else by a compare-and-swap on the value read that
// makes it expire at once; otherwise it changes nothing and returns
// ErrNotHeld. The compare-and-delete is bounded by ctx itself and runs on
// the caller's goroutine (asyncAfter); the fallback, which gomemcache runs
// without a context, finishes in the background when ctx ends first, and
// is what settles a compare-and-delete that ctx cut short.
func (l *lease) Release(ctx context.Context) error {
	return l.d.asyncAfter(ctx, l.releaseMeta, func(maybeDone bool) error {
		return l.d.releaseByID(l.names, l.id, maybeDone)
	})
}
