package redis

import (
	"context"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/driver"
)

// lease is one lock held on Redis: the lock key holds id until it expires,
// is released, or someone tampers with it.
type lease struct {
	d        *Driver
	names    names
	id       string
	token    uint64
	validity atomic.Int64 // time.Duration of the latest grant or extension
}

var _ driver.Lease = (*lease)(nil)

// Token returns the fencing token the acquire script issued.
func (l *lease) Token() uint64 { return l.token }

// Validity returns the TTL of the latest grant or extension: Redis promised
// at least that much (rounded up to whole milliseconds) from when it ran the
// script, which is after the call started.
func (l *lease) Validity() time.Duration { return time.Duration(l.validity.Load()) }

// Extend pushes the lock's expiry to ttl from now, if the lock still holds
// this lease's ID; otherwise it changes nothing and returns ErrNotHeld.
func (l *lease) Extend(ctx context.Context, ttl time.Duration) error {
	if err := l.d.enter(ctx); err != nil {
		return err
	}
	ok, err := extendScript.Run(ctx, l.d.client, []string{l.names.lock}, l.id, millis(ttl)).Int64()
	if err != nil {
		return l.d.opErr(err)
	}
	if ok != 1 {
		return driver.ErrNotHeld
	}
	l.validity.Store(int64(ttl))
	return nil
}

// Release deletes the lock and wakes its waiters, if the lock still holds
// this lease's ID; otherwise it changes nothing and returns ErrNotHeld.
func (l *lease) Release(ctx context.Context) error {
	if err := l.d.enter(ctx); err != nil {
		return err
	}
	released, err := release(ctx, l.d.client, l.names, l.id)
	if err != nil {
		return l.d.opErr(err)
	}
	if !released {
		return driver.ErrNotHeld
	}
	return nil
}

// release runs the compare-and-delete script: for Release, and for
// TryAcquire giving back a grant whose reply it could not wait for.
func release(ctx context.Context, client goredis.Scripter, n names, id string) (bool, error) {
	ok, err := releaseScript.Run(ctx, client, []string{n.lock}, id, n.channel).Int64()
	return ok == 1, err
}
