package redis

import (
	"context"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/leasekit"
)

// lease is one hold on Redis: the field h:ID of the lock hash, there until
// it expires, is released, or someone tampers with the lock. Redis does
// not tell a holder of its loss: the next Extend finds it.
type lease struct {
	driver.NoReports
	// Grant holds the fencing token of the grant (the acquire script issued
	// it, or, for a reentrant entry, the entry it joined), and the TTL of
	// the latest grant or extension as its validity: Redis promised at least
	// that much (rounded up to whole milliseconds) from when it ran the
	// script, which is after the call started.
	leasekit.Grant
	d     *Driver
	names names
	id    string
}

var _ driver.Lease = (*lease)(nil)

// Extend pushes this hold's expiry to ttl from now, if it is still there;
// otherwise it changes nothing and returns ErrNotHeld.
func (l *lease) Extend(ctx context.Context, ttl time.Duration) error {
	if err := l.d.enter(ctx); err != nil {
		return err
	}
	c, acked := l.d.ackedFor(ttl)
	ok, err := extend(ctx, c, l.names, l.id, ttl)
	if err == nil && ok {
		err = acked.shortfall() // not renewed where a failover would keep it
	}
	if err != nil {
		return l.d.callErr(ctx, err)
	}
	if !ok {
		return driver.ErrNotHeld
	}
	l.SetValidity(ttl)
	return nil
}

// Release removes this hold, and wakes the key's waiters when that frees
// the lock, if the hold is still there; otherwise it changes nothing and
// returns ErrNotHeld.
func (l *lease) Release(ctx context.Context) error {
	if err := l.d.enter(ctx); err != nil {
		return err
	}
	released, err := release(ctx, l.d.client, l.names, l.id, l.d.publish)
	if err != nil {
		return l.d.callErr(ctx, err)
	}
	if !released {
		return driver.ErrNotHeld
	}
	return nil
}

// grant is the outcome of the acquire script on one server.
type grant struct {
	ok    bool
	token uint64        // when ok
	again bool          // when ok: a re-entry or a resend joined an existing hold
	retry time.Duration // when refused: how long the holder's lease still runs
}

// modeArg is the acquire script's name for a mode.
func modeArg(m driver.Mode) string {
	if m == driver.Shared {
		return "s"
	}
	return "x"
}

// acquire runs the acquire script for req on one server; a new grant
// reserves block fencing tokens, and is settled at once.
func acquire(ctx context.Context, c goredis.Scripter, n names, req driver.Request, waiter string, block uint64) (grant, error) {
	return runAcquire(ctx, acquireScript, c, n, req, waiter, block, false)
}

// runAcquire runs script, acquire.lua or a script built around it (RedLock's
// ticket, whose argument comes in extra), for req on one server, and reads
// its reply. The hold stores req.Value; pending marks it unsettled until
// the fence script runs for it (RedLock's first phase: see lua/prelude.lua).
func runAcquire(ctx context.Context, script *goredis.Script, c goredis.Scripter, n names, req driver.Request, waiter string, block uint64, pending bool, extra ...any) (grant, error) {
	args := append(acquireArgs(req, waiter, block, pending), extra...)
	res, err := script.Run(ctx, c, []string{n.lock, n.fence(), n.waiters()}, args...).Int64Slice()
	if err != nil {
		return grant{}, err
	}
	if len(res) != 3 {
		return grant{}, fmt.Errorf("redis: acquire script returned %d values, want 3", len(res))
	}
	if res[0] != 1 {
		return grant{retry: time.Duration(max(res[1], 0)) * time.Millisecond}, nil
	}
	return grant{ok: true, token: uint64(res[1]), again: res[2] == 1}, nil
}

// acquireArgs are acquire.lua's ARGV for req (see runAcquire), shared with
// anyacquire.lua, which passes them for each of its requests.
func acquireArgs(req driver.Request, waiter string, block uint64, pending bool) []any {
	pend := ""
	if pending {
		pend = "1"
	}
	return []any{req.ID, millis(req.TTL), modeArg(req.Mode), req.Owner, writerWait(req.TTL), waiter, millis(queueLife(req.TTL)), block, req.Value, pend}
}

// extend runs the extend script for hold id on one server.
func extend(ctx context.Context, c goredis.Scripter, n names, id string, ttl time.Duration) (bool, error) {
	ok, err := extendScript.Run(ctx, c, []string{n.lock}, id, millis(ttl)).Int64()
	return ok == 1, err
}

// fence runs the fence script for hold id on one server: the hold gets
// token, and the counter moves past the block of block tokens from it.
func fence(ctx context.Context, c goredis.Scripter, n names, id string, token, block uint64) error {
	return fenceScript.Run(ctx, c, []string{n.lock, n.fence()}, id, strconv.FormatUint(token, 10), strconv.FormatUint(token+block-1, 10)).Err()
}

// release runs the release script for hold id on one server: for Release,
// and for Acquire giving back a grant whose reply it could not wait for.
// When that frees the lock, the script may grant it to the queue's head
// (lua/release.lua), hence the fencing counter among its keys.
func release(ctx context.Context, c goredis.Scripter, n names, id, publish string) (bool, error) {
	ok, err := releaseScript.Run(ctx, c, []string{n.lock, n.waiters(), n.fence()}, id, n.channel(), publish).Int64()
	return ok == 1, err
}
