package memcache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// With the server selector known, the uncontended path speaks meta commands
// on the driver's own connections (meta.go), so that a grant and its
// release take one round trip each:
//
//   - Acquire writes "ms <lock> ... ME c" (add, returning the new item's CAS
//     unique) and, when the fencing counter lives on the same server,
//     "ma <fence> N0 J<start> D16 v" at once behind it: the server runs a
//     connection's commands in order, so the token is still drawn after the
//     add (fence.go), and a counter that is missing is created from the
//     clock as nextToken would (J is the value ma stores and returns when it
//     creates the counter). A refused add's ma only wastes a block.
//   - Release sends "md <lock> C<cas>", and Extend "ms <lock> ... C<cas> c",
//     with the CAS unique the lease's last write returned, ON THE SAME
//     CONNECTION that write went on.
//
// Why the same connection: memcached's CAS uniques come from one counter per
// server process, which starts again from 1 when the process restarts (and
// is always 0 under -C). A CAS unique remembered across a restart could
// name another holder's item, and a compare-and-delete by it would remove
// that holder's lock. A TCP connection is served by one process for its
// whole life, so a CAS unique returned on a connection that is still open
// names, on that connection, only the very item our write stored (or
// nothing): a match proves the item is still ours. When that connection is
// busy or gone, the CAS unknown (a lost reply, a 0), or the item changed
// (EX: our concurrent Extend, a batch renewal, another holder), the lease
// falls back to the read-and-compare by request ID of cas.go.

// errConnBusy is returned by roundOn when the connection it was asked to use
// is not idle in the pool: nothing was sent.
var errConnBusy = errors.New("memcached: the connection of the lease's last write is not available")

// written is where a lease's last write went and the CAS unique it returned:
// the item is ours as long as, on connection c, it still has CAS unique cas.
// The zero value means unknown.
type written struct {
	addr net.Addr
	c    *metaConn
	cas  uint64
}

// roundOn runs one pipelined round of n commands on a connection to addr:
// on want, when it is not nil (errConnBusy if it is not idle in the pool),
// or else on any, dialling again while a pooled connection turns out dead
// before any reply (again then reports that an earlier attempt may have
// been applied). It returns the connection used, back in the pool, and how
// many replies were read; each sees every reply, and cannot abort.
func (d *Driver) roundOn(ctx context.Context, addr net.Addr, want *metaConn, cmds []byte, n int, each func(i int, fields [][]byte, data []byte)) (used *metaConn, answered int, again bool, err error) {
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, 0, again, err
		}
		c := want
		if c != nil {
			if !d.meta.take(addr, c) {
				return nil, 0, false, errConnBusy
			}
		} else if c, err = d.meta.get(ctx, addr); err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				err = ctxErr
			}
			return nil, 0, again, err
		}
		answered = 0
		err = c.round(ctx, d.meta.timeout, cmds, n, func(i int, fields [][]byte, data []byte) error {
			each(i, fields, data)
			answered = i + 1
			return nil
		})
		if err == nil {
			d.meta.put(addr, c)
			return c, answered, again, nil
		}
		_ = c.nc.Close()
		if want == nil && answered == 0 && deadConn(err) && attempt < d.attempts && ctx.Err() == nil {
			again = true
			continue
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			err = ctxErr
		}
		return nil, answered, again, err
	}
}

// metaAdded is the outcome of addMeta.
type metaAdded struct {
	stored bool    // the add stored the item: it is ours
	w      written // when stored, where, with its CAS unique (zero if unknown)
	token  uint64  // the grant's token, when the pipelined ma drew one; else 0
}

// addMeta adds the lock item n.lock with value v, expiring in secs, by a
// meta set in add mode, and draws a fencing token in the same round trip
// when withToken is set and the counter lives on the same server. again
// reports that an earlier attempt, on a connection that broke, may have
// been applied (a "not stored" may then be our own item). When err is not
// nil, maybeStored reports whether the add may have been applied all the
// same. A reply to the add other than stored or not stored is an error
// (e.g. SERVER_ERROR out of memory: then nothing was stored).
func (d *Driver) addMeta(ctx context.Context, n names, v []byte, secs int32, withToken bool) (a metaAdded, again, maybeStored bool, err error) {
	addr, err := d.meta.pick(n.lock)
	if err != nil {
		return metaAdded{}, false, false, err
	}
	cmds := fmt.Appendf(make([]byte, 0, 128+len(v)+len(n.fence)), "ms %s %d T%d ME c\r\n%s\r\n", n.lock, len(v), secs, v)
	count := 1
	if withToken {
		if fenceAddr, err := d.meta.pick(n.fence); err == nil && fenceAddr.String() == addr.String() {
			start := uint64(time.Now().UnixMicro())
			cmds = fmt.Appendf(cmds, "ma %s N0 J%d D%d v\r\n", n.fence, start+tokenBlock-1, tokenBlock)
			count = 2
		}
	}
	var addReply []byte
	used, answered, again, err := d.roundOn(ctx, addr, nil, cmds, count, func(i int, fields [][]byte, data []byte) {
		if i == 0 {
			addReply = append([]byte(nil), fields[0]...)
			if string(fields[0]) == "HD" {
				if cas, ok := casOf(fields[1:]); ok && cas != 0 {
					a.w = written{addr: addr, cas: cas}
				}
			}
			return
		}
		// The counter's reply: anything but a good value leaves the token
		// to drawToken, which reports a counter it cannot advance.
		if t, err := tokenOf(n.fence, bytes.Join(fields, []byte(" ")), data); err == nil {
			a.token = t
		}
	})
	if answered == 0 {
		if err == nil {
			err = fmt.Errorf("%w: no reply to the add", errMetaReply)
		}
		// The round may have failed after the add went out (or before:
		// a dial error; a removal by ID is harmless then).
		return metaAdded{}, again, true, err
	}
	switch string(addReply) {
	case "HD":
		a.stored = true
		if used == nil {
			// The connection broke after the add's reply: the CAS unique
			// cannot be used on another, and the token is drawn again.
			a.w, a.token = written{}, 0
		} else if a.w.cas != 0 {
			a.w.c = used
		}
		return a, again, false, nil
	case "NS":
		return metaAdded{}, again, false, nil
	}
	return metaAdded{}, again, again, fmt.Errorf("%w to an add: %q", errMetaReply, addReply)
}

// releaseMeta tries the one-round-trip release of l: md with the CAS unique
// of its last write, on that write's connection. handled reports that the
// outcome is known (err is then the release's); otherwise the caller falls
// back to the release by request ID, and maybeApplied reports that the md
// may have deleted the item (its reply was lost).
func (l *lease) releaseMeta(ctx context.Context) (handled, maybeApplied bool, err error) {
	w := l.lastWrite()
	if w.c == nil {
		return false, false, nil
	}
	l.setLastWrite(written{}) // whatever happens, this CAS unique is spent
	cmd := fmt.Appendf(nil, "md %s C%d\r\n", l.names.lock, w.cas)
	var reply string
	_, answered, _, err := l.d.roundOn(ctx, w.addr, w.c, cmd, 1, func(_ int, fields [][]byte, _ []byte) {
		reply = string(fields[0])
	})
	switch {
	case errors.Is(err, errConnBusy):
		return false, false, nil
	case answered == 0:
		return false, err != nil, nil
	}
	switch reply {
	case "HD":
		l.d.hints.drop(l.names.lock)
		return true, false, nil
	case "NF":
		return true, false, driver.ErrNotHeld // no item at all: nothing of ours
	}
	return false, false, nil // EX: changed since our write; the ID tells
}

// extendMeta tries the one-round-trip renewal of l: ms with the CAS unique
// of its last write, on that write's connection, returning the new CAS
// unique for the next. handled reports that the outcome is known (err is
// then the renewal's); otherwise the caller falls back to the renewal by
// request ID.
func (l *lease) extendMeta(ctx context.Context, secs int32) (handled bool, err error) {
	w := l.lastWrite()
	if w.c == nil {
		return false, nil
	}
	l.setLastWrite(written{})
	h := l.held()
	h.expires = time.Now().Add(time.Duration(secs) * time.Second)
	v := encodeValue(h)
	cmd := fmt.Appendf(make([]byte, 0, 128+len(v)), "ms %s %d T%d C%d c\r\n%s\r\n", l.names.lock, len(v), secs, w.cas, v)
	var reply string
	var next written
	used, answered, _, err := l.d.roundOn(ctx, w.addr, w.c, cmd, 1, func(_ int, fields [][]byte, _ []byte) {
		reply = string(fields[0])
		if cas, ok := casOf(fields[1:]); ok && cas != 0 && reply == "HD" {
			next = written{addr: w.addr, cas: cas}
		}
	})
	if answered == 0 || err != nil {
		return false, nil // the ms may have applied: harmless, the fallback rewrites
	}
	switch reply {
	case "HD":
		if next.cas != 0 {
			next.c = used
			l.setLastWrite(next)
		}
		return true, nil
	case "NF":
		return true, driver.ErrNotHeld
	}
	return false, nil // EX: changed since our write; the ID tells
}
