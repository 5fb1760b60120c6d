package memcache

import (
	"context"
	"errors"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/driveropt"
	"github.com/dlock-go/dlock/internal/inflight"
)

// Driver is a dlock driver over memcached: see [Driver.Capabilities] for
// what it offers. Make it with [New] over a gomemcache client, or through
// dlock.Open with a "memcache://" or "memcached://" URL. It is safe for
// concurrent use.
type Driver struct {
	mc       *gomemcache.Client
	owned    bool // the client was made from a URL, so Close closes it
	prefix   string
	attempts int // tries per request, for dead pooled connections (see call)
	hints    hints
	places   places     // this Driver's tickets in the lines of waiters (queue.go)
	meta     *metaConns // pipelined meta commands, when the selector is known (else nil)

	inflight inflight.Group // operations Close waits for
}

var _ driver.Driver = (*Driver)(nil)

// New returns a Driver over client, which the caller keeps owning: Close
// does not close it. Each Driver is an independent lock client, even when
// several share one gomemcache client.
//
// The client's Timeout bounds every request (gomemcache takes no contexts),
// and its MaxIdleConns should cover the number of goroutines that lock at
// once. Its server list must be the same in every process that locks the
// same keys (see "Several servers" in the package documentation).
func New(client *gomemcache.Client, opts ...Option) (*Driver, error) {
	if client == nil {
		return nil, errors.New("memcached: New with a nil client")
	}
	o := defaultOptions()
	if err := driveropt.Apply(&o, opts); err != nil {
		return nil, err
	}
	return newDriver(client, false, o), nil
}

func newDriver(client *gomemcache.Client, owned bool, o options) *Driver {
	idle := client.MaxIdleConns
	if idle <= 0 {
		idle = gomemcache.DefaultMaxIdleConns
	}
	d := &Driver{
		mc:     client,
		owned:  owned,
		prefix: o.prefix,
		// Enough to get past every pooled connection a restart left dead,
		// and one more to dial a new one.
		attempts: min(idle, 64) + 1,
	}
	if o.selector != nil {
		d.meta = newMetaConns(o.selector, client)
	}
	return d
}

// Capabilities reports plain exclusive locks whose grants reserve blocks of
// 16 fencing tokens (TokenBlock), and TTLs from [MinTTL] (5 s) to [MaxTTL]
// (30 days): see "Guarantees" in the package documentation for why. It
// accepts every key the core accepts: the driver maps any key onto a
// memcached key of its own (see "Keys" in the package documentation).
// memcached cannot notify waiters: the core polls. When the Driver knows
// the client's server selector (a Driver made from a URL, or [New] with
// [WithSelector]), it renews many locks in a few round trips
// (BatchExtender: see [Driver.ExtendBatch]), and describes a lock with one
// meta read (Inspector: see [Driver.Inspect]), which reports the value a
// hold was taken with beside its fencing token (Values), so that
// dlock.Election can name its leader.
func (d *Driver) Capabilities() driver.Capabilities {
	c := driver.Capabilities{
		TokenBlock: tokenBlock,
		MinTTL:     MinTTL,
		MaxTTL:     MaxTTL,
		TTLReason:  ttlReason,
	}
	if d.meta != nil {
		c.BatchExtender = d
		c.Inspector = d
		c.Values = true
	}
	return c
}

// Close closes the gomemcache client if the Driver made it from a URL (never
// one passed to [New]), once the Driver's operations still running in the
// background (a Release or Extend whose context ended) have finished; each
// of their requests is bounded by the client's Timeout. Locks still held are
// not released: they expire by their TTL. Later calls return
// driver.ErrClosed; a second Close returns nil.
func (d *Driver) Close() error {
	if !d.inflight.Close(nil) {
		return nil
	}
	if d.meta != nil {
		d.meta.close()
	}
	if d.owned {
		return d.mc.Close()
	}
	return nil
}

// enter checks that the Driver is open and ctx alive, before any I/O, and
// counts the operation in flight until done is called.
func (d *Driver) enter(ctx context.Context) (done func(), err error) {
	done, ok := d.inflight.Enter()
	if !ok {
		return nil, driver.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		done()
		return nil, err
	}
	return done, nil
}
