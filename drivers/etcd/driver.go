package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/deadline"
	"github.com/dlock-go/dlock/internal/driveropt"
	"github.com/dlock-go/dlock/internal/inflight"
)

// Driver is a dlock driver over an etcd cluster; [Driver.Capabilities] lists
// what it can do. Make it with [New] over a clientv3 client, or through
// dlock.Open with an "etcd://" URL. It is safe for concurrent use.
type Driver struct {
	cli    *clientv3.Client
	owned  bool // made from a URL, so Close closes it
	prefix string
	ttl    time.Duration // of the session lease, as configured

	// ctx is cancelled, with cause driver.ErrClosed, by Close: it ends every
	// keeper, and so every lease (told by its keepers), and every wait.
	ctx    context.Context
	cancel context.CancelCauseFunc
	work   inflight.Group // background goroutines, which Close waits for

	// deadlines holds the driver's own deadline of every lease (see lease).
	deadlines *deadline.Queue[*lease]

	// granting admits one session grant at a time.
	granting chan struct{}

	mu    sync.Mutex
	sess  *keeper                      // the current session; nil before the first lock
	holds map[clientv3.LeaseID]*keeper // leases of reentrant holds this Driver takes part in
}

var _ driver.Driver = (*Driver)(nil)

// New returns a Driver over cli, which the caller keeps owning: Close does
// not close it. Each Driver is an independent lock client with a session
// lease of its own, even when several share one clientv3 client. The
// session is granted at the first lock, not here.
func New(cli *clientv3.Client, opts ...Option) (*Driver, error) {
	if cli == nil {
		return nil, errors.New("etcd: New with a nil client")
	}
	o := defaultOptions()
	if err := driveropt.Apply(&o, opts); err != nil {
		return nil, err
	}
	return newDriver(cli, false, o), nil
}

func newDriver(cli *clientv3.Client, owned bool, o options) *Driver {
	d := &Driver{
		cli:      cli,
		owned:    owned,
		prefix:   o.prefix,
		ttl:      o.ttl,
		granting: make(chan struct{}, 1),
		holds:    map[clientv3.LeaseID]*keeper{},
	}
	d.deadlines = deadline.NewQueue((*lease).expire)
	d.ctx, d.cancel = context.WithCancelCause(context.Background())
	return d
}

// Capabilities reports read-write and reentrant locks, waiting in etcd's
// queue (Blocking), batched renewal, the first free lock among several in
// one transaction (AnyAcquirer: see AcquireAny), inspection with the
// holder's value (Values: see Inspect), and TTLs up to the
// Driver's session TTL (see "Capabilities" in the package documentation).
// Every key the core accepts is accepted: etcd names are binary safe, and
// the driver's escaping keeps every key's names apart.
//
// A lock lives under the session lease, so etcd can promise it no longer
// than the session TTL: a longer TTL could not be honoured, and the core
// would renew it too late.
func (d *Driver) Capabilities() driver.Capabilities {
	return driver.Capabilities{
		Shared:        true,
		Reentrant:     true,
		Blocking:      true,
		MaxTTL:        d.ttl,
		TTLReason:     fmt.Sprintf("this etcd driver's session TTL of %v bounds every lock's; open the driver with a longer session TTL (URL parameter session_ttl, or WithSessionTTL)", d.ttl),
		BatchExtender: d,
		AnyAcquirer:   d,
		Inspector:     d,
		Values:        true,
	}
}

// Close stops the Driver's keepalives and waits for its background work,
// and closes the clientv3 client if the Driver made it from a URL (never one
// passed to [New]). Locks still held are not released and their leases are
// not revoked: etcd frees them when the session lease expires, one session
// TTL after the last keepalive, as it would if the process had died. Their
// leases report a loss with driver.ErrClosed. Later calls return
// driver.ErrClosed; a second Close returns nil.
func (d *Driver) Close() error {
	if !d.work.Close(func() { d.cancel(driver.ErrClosed) }) {
		return nil
	}
	if d.owned {
		return d.cli.Close()
	}
	return nil
}

// closing reports whether Close has begun.
func (d *Driver) closing() bool { return d.ctx.Err() != nil }

// enter checks that the Driver is open and ctx alive, before any I/O.
func (d *Driver) enter(ctx context.Context) error {
	if d.closing() {
		return driver.ErrClosed
	}
	return ctx.Err()
}

// opErr turns the error of a call into what the core expects: exactly
// ctx's error when ctx ended (or its deadline passed: see ctxErr),
// ErrClosed when the Driver closed meanwhile, otherwise the error itself,
// marked transient when etcd is unavailable for now (see markTransient),
// for the core to wrap once.
func (d *Driver) opErr(ctx context.Context, err error) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	if d.closing() {
		return driver.ErrClosed
	}
	return markTransient(err)
}

// spawn runs f in a goroutine that Close waits for; false after Close.
func (d *Driver) spawn(f func()) bool { return d.work.Go(f) }

// session returns the Driver's live session, granting a new lease when there
// is none yet or the last one was lost.
func (d *Driver) session(ctx context.Context) (*keeper, error) {
	if k := d.liveSession(); k != nil {
		return k, nil
	}
	select {
	case d.granting <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-d.ctx.Done():
		return nil, driver.ErrClosed
	}
	defer func() { <-d.granting }()
	if k := d.liveSession(); k != nil {
		return k, nil // granted by the caller we waited for
	}
	k, err := d.grant(ctx, d.ttl, true)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.sess = k
	d.mu.Unlock()
	return k, nil
}

func (d *Driver) liveSession() *keeper {
	d.mu.Lock()
	k := d.sess
	d.mu.Unlock()
	if k != nil && k.lost() == nil {
		return k
	}
	return nil
}

// grant asks etcd for a lease of ttl and starts keeping it alive.
func (d *Driver) grant(ctx context.Context, ttl time.Duration, revokeOnLoss bool) (*keeper, error) {
	sent := time.Now()
	resp, err := d.cli.Grant(ctx, int64(ttl/time.Second))
	if err != nil {
		// A lease granted after all expires by itself: nothing holds it.
		return nil, d.opErr(ctx, err)
	}
	k, ok := d.newKeeper(resp.ID, time.Duration(resp.TTL)*time.Second, sent, revokeOnLoss)
	if !ok {
		return nil, driver.ErrClosed
	}
	return k, nil
}
