package hazelcast

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hazelcast/hazelcast-go-client"
	"github.com/hazelcast/hazelcast-go-client/hzerrors"
	"github.com/hazelcast/hazelcast-go-client/types"

	"github.com/dlock-go/dlock/driver"
)

// Driver is a dlock driver over a Hazelcast cluster's map entry locks: see
// [Driver.Capabilities] for what it offers. Make it with New over a client,
// or through dlock.Open with a "hazelcast://" URL. It is safe for
// concurrent use.
type Driver struct {
	client    *hazelcast.Client // nil only in the package's unit tests
	owned     bool              // made from a URL: Close shuts the client down
	nagle     *nagle            // of an owned client: see nagle.go; nil otherwise
	listener  types.UUID        // the lifecycle listener New added to a caller's client
	api       api
	session   *session
	waitSlice time.Duration
	now       func() time.Time // time.Now; the tests replace it

	closed      atomic.Bool
	closing     context.Context // ends in-flight calls at Close
	stopClosing context.CancelFunc
	watching    sync.WaitGroup // the goroutine of watch (session.go)
}

var _ driver.Driver = (*Driver)(nil)

// New returns a Driver over client, which the caller keeps owning: Close
// neither shuts it down nor releases its locks. ctx bounds the calls that get
// the two maps' proxies. Each Driver is an independent lock client, even when
// several share one Hazelcast client: every acquisition has a lock owner of
// its own.
//
// The client must be connected (hazelcast.StartNewClientWithConfig). The
// Driver listens to its lifecycle events to report leases lost when it
// disconnects: see "Guarantees" in the package documentation.
func New(ctx context.Context, client *hazelcast.Client, opts ...Option) (*Driver, error) {
	if client == nil {
		return nil, errors.New("hazelcast: New with a nil client")
	}
	o := defaultOptions()
	if err := o.apply(opts); err != nil {
		return nil, err
	}
	s := newSession()
	d, err := connect(ctx, client, o, s)
	if err != nil {
		return nil, err
	}
	if d.listener, err = client.AddLifecycleListener(s.onLifecycle); err != nil {
		d.stopClosing()
		d.watching.Wait()
		return nil, fmt.Errorf("hazelcast: listen to the client's lifecycle: %w", err)
	}
	return d, nil
}

// connect makes a Driver over a started client, with its two maps.
func connect(ctx context.Context, client *hazelcast.Client, o options, s *session) (*Driver, error) {
	locks, err := client.GetMap(ctx, o.mapName)
	if err != nil {
		return nil, fmt.Errorf("hazelcast: lock map %q: %w", o.mapName, err)
	}
	fences, err := client.GetMap(ctx, o.mapName+FenceSuffix)
	if err != nil {
		return nil, fmt.Errorf("hazelcast: fencing map %q: %w", o.mapName+FenceSuffix, err)
	}
	d := newDriver(hzAPI{locks: locks, fences: fences}, o, s)
	d.client = client
	// The question that tells a connected client: a read of an entry of
	// the fencing map that no lock uses (keys of locks are never empty).
	d.watching.Add(1)
	go d.watch(func(ctx context.Context) error {
		_, err := fences.ContainsKey(ctx, "")
		return err
	})
	return d, nil
}

// newDriver makes a Driver over a, with session s.
func newDriver(a api, o options, s *session) *Driver {
	d := &Driver{api: a, session: s, waitSlice: o.waitSlice, now: time.Now}
	d.closing, d.stopClosing = context.WithCancel(context.Background())
	return d
}

// Capabilities reports waiting in the member's queue (Blocking: see
// [Driver.Acquire]), batched renewal (ExtendBatch), inspection
// ([Driver.Inspect]: whether a lock is held, and the latest fencing token),
// and TTLs of [MinTTL] (2 s) or more.
//
// There are no Values: a value the holder wrote beside its token could not
// be tied to the hold current when it is read (see "Inspection" in the
// package documentation), so Election.Leader and Election.Observe are
// unsupported over this driver; Campaign and Resign work.
//
// There are no read-write and no reentrant locks. Map locks have no shared
// mode. They are reentrant, but per lock owner, and a lock owner is a lock
// context of one client: the owner of a reentrant dlock lock
// (dlock.WithOwner) may re-enter from any client, which no pair of
// Hazelcast clients can share.
//
// Every key the core accepts is accepted; see "Keys" in the package
// documentation. Members may free a lock up to a second before its lease
// ends, which leaves TTLs below MinTTL too little validity. Leases are whole
// milliseconds, so TTLs are rounded up to the next one. A member whose
// hazelcast.lock.max.lease.time.seconds is below the TTL refuses the lock
// with an error.
func (d *Driver) Capabilities() driver.Capabilities {
	return driver.Capabilities{
		Blocking:      true,
		MinTTL:        MinTTL,
		TTLReason:     ttlReason,
		BatchExtender: d,
		Inspector:     d,
	}
}

// ttlReason explains MinTTL in the core's error for a shorter TTL.
const ttlReason = "members end leases in whole seconds, up to a second early"

// checkTTL reports why ttl cannot be a lease length on Hazelcast, or nil.
func checkTTL(ttl time.Duration) error {
	if ttl < MinTTL {
		return fmt.Errorf("%v is below the Hazelcast driver's minimum of %v: %s", ttl, MinTTL, ttlReason)
	}
	return nil
}

// Close stops the Driver: in-flight calls end, every lease reports its loss
// (OnLoss), and later calls return driver.ErrClosed. A client the Driver made from
// a URL is shut down; a client passed to New is left running. Either way the
// locks still held end by their lease (or when the members clean up after a
// client that left). A second Close returns nil.
func (d *Driver) Close() error {
	if !d.closed.CompareAndSwap(false, true) {
		return nil
	}
	d.stopClosing()
	d.session.close(errDriverClosed)
	d.watching.Wait()
	if d.client == nil {
		return nil
	}
	if d.owned {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		return d.client.Shutdown(ctx)
	}
	if err := d.client.RemoveLifecycleListener(d.listener); err != nil && !errors.Is(err, hzerrors.ErrClientNotActive) {
		return err
	}
	return nil
}

// shutdownTimeout bounds the shutdown of a client the Driver made.
const shutdownTimeout = 10 * time.Second

// enter checks that the Driver is open and ctx alive, before any call.
func (d *Driver) enter(ctx context.Context) error {
	if d.closed.Load() {
		return driver.ErrClosed
	}
	return ctx.Err()
}

// ExtendBatch extends each lease as Extend would, many at a time: Hazelcast
// has no multi-key lock call, but the client multiplexes calls on its
// connections, so the batch costs about as long as its slowest Extend.
func (d *Driver) ExtendBatch(ctx context.Context, leases []driver.Lease, ttls []time.Duration) []error {
	return extendBatch(ctx, leases, ttls)
}
