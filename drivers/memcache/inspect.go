package memcache

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// Inspect describes the lock key from its lock item, read with one meta get
// (mg ... v t) that returns the item's value and the seconds it has left by
// the server's clock together, so the holder, its value, its token and its
// TTL come from one hold: the holder's request ID (Owner), the fencing
// token and Request.Value recorded in the item, and TTL in whole seconds
// (memcached's clock; see "Guarantees" in the package documentation).
//
// A lock taken with a Value records its token in a rewrite that follows the
// add within two round trips (see Acquire); an Inspect that finds the
// value without the token reads again for up to the client's Timeout, so
// that it reports the settled grant, and if the rewrite never comes (its
// client died in between) reports the lock held with Token 0 and no Value,
// as a grant that is not settled (see driver.Capabilities.Values). A lock
// without a value records its token at its first renewal: until then Token
// is 0. A free lock reports Token 0 too: the fencing counter is not read.
// memcached keeps no queue, so Waiters is -1. A key held by an item the
// driver did not write is reported held, by nobody known.
//
// The tokens of the core's handoffs inside one Client (TokenBlock) never
// reach the server: the item keeps its grant's token.
func (d *Driver) Inspect(ctx context.Context, key string) (driver.Info, error) {
	done, err := d.enter(ctx)
	if err != nil {
		return driver.Info{}, err
	}
	defer done()
	n := namesOf(d.prefix, key)
	addr, err := d.meta.pick(n.lock)
	if err != nil {
		return driver.Info{}, err
	}
	cmd := fmt.Appendf(nil, "mg %s v t\r\n", n.lock)
	deadline := time.Now().Add(d.meta.timeout)
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		var info driver.Info
		settling := false
		err := d.metaRound(ctx, addr, cmd, 1, func(_ int, fields [][]byte, data []byte) error {
			var err error
			info, settling, err = infoOf(fields, data)
			return err
		}, func(int, error) {})
		if err != nil || !settling {
			return info, err
		}
		if !time.Now().Before(deadline) {
			info.Value = "" // never a value without the token of its grant
			return info, nil
		}
		timer := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			timer.Stop()
			return driver.Info{}, ctx.Err()
		case <-timer.C:
		}
	}
}

// infoOf reads the reply to a meta get of a lock item with its value and
// TTL. settling reports an item whose value is recorded and token not yet:
// info then carries the value, which Inspect must not report alone.
func infoOf(fields [][]byte, data []byte) (info driver.Info, settling bool, err error) {
	info.Waiters = -1
	switch string(fields[0]) {
	case "EN":
		return info, false, nil
	case "VA":
	default:
		return driver.Info{}, false, fmt.Errorf("%w: %q", errMetaReply, bytes.Join(fields, []byte(" ")))
	}
	info.Held, info.Mode, info.Holders = true, driver.Exclusive, 1
	if secs, ok := ttlOf(fields[2:]); ok && secs > 0 {
		info.TTL = time.Duration(secs) * time.Second
	}
	h, ok := parseValue(data)
	if !ok {
		return info, false, nil
	}
	info.Owner, info.Token, info.Value = h.id, h.token, h.value
	return info, h.token == 0 && h.value != "", nil
}

// ttlOf finds the remaining TTL among a meta reply's return flags ("t42"; -1
// for an item without expiry).
func ttlOf(flags [][]byte) (int64, bool) {
	for _, f := range flags {
		if len(f) > 1 && f[0] == 't' {
			v, err := strconv.ParseInt(string(f[1:]), 10, 64)
			return v, err == nil
		}
	}
	return 0, false
}
