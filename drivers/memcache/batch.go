package memcache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// batchSize is how many leases one pipelined round carries: renewing n held
// locks on one server costs about 2·n/batchSize round trips instead of 2·n.
const batchSize = 500

// errForeignLease is the error of a lease in a batch that this Driver did
// not make.
var errForeignLease = errors.New("memcached: lease not made by this driver")

// ExtendBatch extends many leases in two pipelined rounds per server (and per
// batchSize leases): the first reads every lock item with its CAS unique
// (mg ... v c), the second rewrites the items that still name their lease's
// request ID, each by a compare-and-swap on the CAS unique just read (ms ...
// C<cas> T<secs>). So every extension is owner-checked exactly as
// Lease.Extend's gets and cas: an item replaced, released or re-stored by
// anyone between the two rounds fails its swap and is never extended. A
// swap that fails because the item changed is retried alone, as
// Lease.Extend would; a lease whose item is gone or someone else's gets
// driver.ErrNotHeld; an error on a server's connection is reported for the
// leases whose reply it cut off.
func (d *Driver) ExtendBatch(ctx context.Context, leases []driver.Lease, ttls []time.Duration) []error {
	errs := make([]error, len(leases))
	done, err := d.enter(ctx)
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	defer done()
	type server struct {
		addr  net.Addr
		items []*renewal
	}
	var servers []*server
	byAddr := make(map[string]*server)
	for i, dl := range leases {
		l, ok := dl.(*lease)
		if !ok || l.d != d {
			errs[i] = errForeignLease
			continue
		}
		if err := checkTTL(ttls[i]); err != nil {
			errs[i] = fmt.Errorf("memcached: TTL %w", err)
			continue
		}
		addr, err := d.meta.pick(l.names.lock)
		if err != nil {
			errs[i] = err
			continue
		}
		s := byAddr[addr.String()]
		if s == nil {
			s = &server{addr: addr}
			byAddr[addr.String()] = s
			servers = append(servers, s)
		}
		s.items = append(s.items, &renewal{l: l, secs: expirySeconds(ttls[i]), err: &errs[i]})
	}
	var alone []*renewal
	for _, s := range servers {
		for start := 0; start < len(s.items); start += batchSize {
			chunk := s.items[start:min(start+batchSize, len(s.items))]
			alone = append(alone, d.extendChunk(ctx, s.addr, chunk)...)
		}
	}
	for _, r := range alone {
		if err := ctx.Err(); err != nil {
			*r.err = err
			continue
		}
		*r.err = d.extend(r.l.names, r.l.held(), r.secs)
		if *r.err == nil {
			r.l.SetValidity(validityOf(r.secs))
		}
	}
	return errs
}

// renewal is one lease of a batch, and where its outcome goes.
type renewal struct {
	l    *lease
	secs int32
	err  *error
	cas  uint64 // the CAS unique read in the first round
}

// extendChunk renews items, all on the server at addr, in two pipelined
// rounds, and returns the items to extend one by one instead: those whose
// swap found the item changed since the read, and those the server answered
// with an error line (e.g. a server without meta commands).
func (d *Driver) extendChunk(ctx context.Context, addr net.Addr, items []*renewal) (alone []*renewal) {
	// Round 1: read every item with its CAS unique.
	var cmds []byte
	for _, r := range items {
		cmds = fmt.Appendf(cmds, "mg %s v c\r\n", r.l.names.lock)
	}
	owned := make([]*renewal, 0, len(items))
	err := d.metaRound(ctx, addr, cmds, len(items), func(i int, fields [][]byte, data []byte) error {
		r := items[i]
		switch string(fields[0]) {
		case "VA":
			if !heldBy(data, r.l.id) {
				*r.err = driver.ErrNotHeld
				return nil
			}
			cas, ok := casOf(fields[2:])
			if !ok {
				return fmt.Errorf("%w: no CAS unique in %q", errMetaReply, bytes.Join(fields, []byte(" ")))
			}
			r.cas = cas
			owned = append(owned, r)
		case "EN":
			*r.err = driver.ErrNotHeld
		default:
			alone = append(alone, r)
		}
		return nil
	}, func(from int, err error) {
		for _, r := range items[from:] {
			*r.err = err
		}
	})
	if err != nil || len(owned) == 0 {
		return alone
	}
	// Round 2: swap every item still ours, if unchanged since the read.
	cmds = cmds[:0]
	now := time.Now()
	for _, r := range owned {
		h := r.l.held()
		h.expires = now.Add(time.Duration(r.secs) * time.Second)
		v := encodeValue(h)
		cmds = fmt.Appendf(cmds, "ms %s %d C%d T%d\r\n%s\r\n", r.l.names.lock, len(v), r.cas, r.secs, v)
	}
	_ = d.metaRound(ctx, addr, cmds, len(owned), func(i int, fields [][]byte, _ []byte) error {
		r := owned[i]
		switch string(fields[0]) {
		case "HD":
			r.l.SetValidity(validityOf(r.secs))
		case "NF", "NS":
			*r.err = driver.ErrNotHeld // expired, evicted or deleted since the read
		default: // EX: changed since the read; or an error line
			alone = append(alone, r)
		}
		return nil
	}, func(from int, err error) {
		for _, r := range owned[from:] {
			*r.err = err
		}
	})
	return alone
}

// metaRound runs one pipelined round of n commands on a connection to addr,
// passing each reply to each. When the round fails, fail gets the error and
// the index of the first command left without a reply. A round that fails on
// a dead pooled connection before any reply (the server restarted, or
// closed it as idle) runs again on another: both rounds of a batch are
// harmless to repeat, a read trivially and a swap because it names the CAS
// unique it expects.
func (d *Driver) metaRound(ctx context.Context, addr net.Addr, cmds []byte, n int, each func(int, [][]byte, []byte) error, fail func(from int, err error)) error {
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			fail(0, err)
			return err
		}
		c, err := d.meta.get(ctx, addr)
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				err = ctxErr
			}
			fail(0, err)
			return err
		}
		answered := 0
		err = c.round(ctx, d.meta.timeout, cmds, n, func(i int, fields [][]byte, data []byte) error {
			if err := each(i, fields, data); err != nil {
				return err
			}
			answered = i + 1
			return nil
		})
		if err == nil {
			d.meta.put(addr, c)
			return nil
		}
		_ = c.nc.Close()
		if answered == 0 && deadConn(err) && attempt < d.attempts && ctx.Err() == nil {
			continue
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			err = ctxErr
		}
		fail(answered, err)
		return err
	}
}

// casOf finds the CAS unique among a meta reply's return flags ("c123").
func casOf(flags [][]byte) (uint64, bool) {
	for _, f := range flags {
		if len(f) > 1 && f[0] == 'c' {
			v, err := strconv.ParseUint(string(f[1:]), 10, 64)
			return v, err == nil
		}
	}
	return 0, false
}
