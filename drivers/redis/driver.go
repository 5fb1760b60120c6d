package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/driver"
)

// Driver is a dlock driver over one Redis server. It implements
// driver.Driver, driver.Notifier and driver.Validator. Make it with [New]
// over a go-redis client, or through dlock.Open with a "redis://" or
// "rediss://" URL. It is safe for concurrent use.
type Driver struct {
	client goredis.UniversalClient
	owned  bool // the client was made from a URL, so Close closes it
	prefix string
	closed atomic.Bool
	notify *notifier
}

var (
	_ driver.Driver    = (*Driver)(nil)
	_ driver.Notifier  = (*Driver)(nil)
	_ driver.Validator = (*Driver)(nil)
)

// New returns a Driver over client, which the caller keeps owning: Close
// does not close it. Each Driver is an independent lock client, even when
// several share one go-redis client.
//
// client should be a single-node client (*goredis.Client, or a failover
// client); Cluster support comes later. Setting ContextTimeoutEnabled on it
// lets the contexts of dlock's calls bound the commands they send, as the
// clients dlock.Open makes do.
func New(client goredis.UniversalClient, opts ...Option) (*Driver, error) {
	if client == nil {
		return nil, errors.New("redis: New with a nil client")
	}
	o := defaultOptions()
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	return newDriver(client, false, o), nil
}

func newDriver(client goredis.UniversalClient, owned bool, o options) *Driver {
	return &Driver{
		client: client,
		owned:  owned,
		prefix: o.prefix,
		notify: newNotifier(client),
	}
}

// ValidateKey accepts every key the core accepts: Redis names are binary
// safe, and the driver's escaping keeps any key's names distinct.
func (d *Driver) ValidateKey(string) error { return nil }

// ValidateTTL accepts every TTL the core accepts (10 ms to 30 days). Redis
// expiries are whole milliseconds, so TTLs are rounded up to the next one:
// the lock is never held for less than asked.
func (d *Driver) ValidateTTL(time.Duration) error { return nil }

// TryAcquire takes the lock req.Key for req.ID with one script: SET NX PX and,
// only when that succeeds, a new fencing token. When another owner holds the
// lock it returns a *driver.LockedError with the holder's remaining TTL.
//
// When the script's outcome is unknown (ctx ended or the connection failed
// after it was sent), it may have been applied: the lock is then released by
// req.ID, with a context that outlives ctx but not the TTL, before the error
// is returned, so that no lock is left behind.
func (d *Driver) TryAcquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	if err := d.enter(ctx); err != nil {
		return nil, err
	}
	if req.Mode != driver.Exclusive || req.Owner != "" {
		// The core never sends these without Featurer; refuse rather than
		// grant a lock that would not exclude the way it was asked to.
		return nil, fmt.Errorf("redis: %s and reentrant locks are %w by this driver", req.Mode, errors.ErrUnsupported)
	}
	n := namesOf(d.prefix, req.Key)
	res, err := acquireScript.Run(ctx, d.client, []string{n.lock, n.fence}, req.ID, millis(req.TTL)).Int64Slice()
	if err != nil {
		if mayHaveApplied(err) && !d.closed.Load() {
			cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), req.TTL)
			_, _ = release(cleanup, d.client, n, req.ID)
			cancel()
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, d.opErr(err)
	}
	if len(res) != 2 {
		return nil, fmt.Errorf("redis: acquire script returned %d values, want 2", len(res))
	}
	if res[0] != 1 {
		return nil, &driver.LockedError{RetryAfter: time.Duration(max(res[1], 0)) * time.Millisecond}
	}
	l := &lease{d: d, names: n, id: req.ID, token: uint64(res[1])}
	l.validity.Store(int64(req.TTL))
	return l, nil
}

// Subscribe starts listening for releases of key on the Driver's shared
// pub/sub connection. See "Capabilities" in the package documentation.
func (d *Driver) Subscribe(ctx context.Context, key string) (driver.Subscription, error) {
	if err := d.enter(ctx); err != nil {
		return nil, err
	}
	s, err := d.notify.subscribe(ctx, namesOf(d.prefix, key).channel)
	if err != nil {
		return nil, d.opErr(err)
	}
	return s, nil
}

// Close ends the Driver's pub/sub connection, and closes the go-redis client
// if the Driver made it from a URL (never one passed to [New]). Locks still
// held are not released: they expire by their TTL. Later calls return
// driver.ErrClosed; a second Close returns nil.
func (d *Driver) Close() error {
	if !d.closed.CompareAndSwap(false, true) {
		return nil
	}
	d.notify.close()
	if d.owned {
		return d.client.Close()
	}
	return nil
}

// enter checks that the Driver is open and ctx alive, before any I/O.
func (d *Driver) enter(ctx context.Context) error {
	if d.closed.Load() {
		return driver.ErrClosed
	}
	return ctx.Err()
}

// opErr turns the error of a command into what the core expects: ErrClosed
// when Close ran meanwhile (go-redis then says its client or pool is closed),
// the error unchanged otherwise, for the core to wrap once.
func (d *Driver) opErr(err error) error {
	if d.closed.Load() {
		return driver.ErrClosed
	}
	return err
}

// mayHaveApplied reports whether a command that failed with err may still
// have run on the server. Only failures known to come before the command was
// sent, or replies from the server itself, say it did not.
func mayHaveApplied(err error) bool {
	var replyErr goredis.Error
	var opErr *net.OpError
	switch {
	case errors.Is(err, goredis.ErrClosed), errors.Is(err, goredis.ErrPoolTimeout):
		return false // never sent
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return false // no connection, so nothing was sent
	case errors.As(err, &replyErr) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded):
		// The server answered: our scripts raise errors before their first
		// write, and nothing else fails midway on a single server.
		return false
	}
	return true
}
