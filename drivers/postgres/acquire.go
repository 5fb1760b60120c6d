package postgres

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/backoff"
)

// Acquire takes the lock. Without req.Block it tries once, in one statement,
// without waiting. With req.Block it waits for the lock in PostgreSQL's own
// queue (pg_advisory_lock): when ctx ends, it cancels the wait with a cancel
// request, keeps the connection, and gives back a grant that raced with the
// cancellation before returning ctx's error. See "Capabilities" in the
// package documentation.
func (d *Driver) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	return d.acquire(ctx, req, req.Block)
}

// outcome of one acquisition statement that did not fail.
type outcome uint8

const (
	granted outcome = iota
	locked          // the lock is held by someone else
	blocked         // the lock itself was free, but an owner group stands in the way
)

func (d *Driver) acquire(ctx context.Context, req driver.Request, wait bool) (driver.Lease, error) {
	if err := d.enter(ctx); err != nil {
		return nil, err
	}
	k := keysOf(req.Key, req.Owner, req.Mode == driver.Shared)
	// Polls of a lock that cannot wait in PostgreSQL's queue: jittered,
	// from 2 ms doubling up to 250 ms.
	b := backoff.Jittered{First: 2 * time.Millisecond, Limit: 250 * time.Millisecond}
	for {
		l, out, err := d.attempt(ctx, req, k, wait)
		if err != nil {
			return nil, d.opErr(ctx, err)
		}
		if out == granted {
			return l, nil
		}
		// A plain wait in the queue only ends with a grant; what is left
		// is an owner group in the way, or an owner request, neither of
		// which waits in the queue (see "Capabilities" in the package
		// documentation): poll.
		if !wait {
			return nil, driver.ErrLocked
		}
		if err := b.Sleep(ctx, nil); err != nil {
			return nil, err
		}
	}
}

// attempt makes one acquisition statement for req on a session of its own
// (see attemptStatement).
func (d *Driver) attempt(ctx context.Context, req driver.Request, k lockKeys, wait bool) (*lease, outcome, error) {
	l, _, out, err := d.attemptStatement(ctx, wait, []driver.Request{req}, []lockKeys{k}, func(s *session) (result, bool, error) {
		return d.run(ctx, s, req, k, wait)
	})
	return l, out, err
}

// attemptStatement runs one acquisition statement, run, on a session of its
// own, retrying on another session when an idle one turns out to have died
// meanwhile, and makes the lease of the request the statement was granted
// (reqs[res.index], whose keys are keys[res.index]): the only one for an
// Acquire, the first free one for an AcquireAny. Whatever the statement may
// have taken is given back when its outcome is an error or comes after ctx
// ended: every lock it took is on that one session, so undoing the session
// undoes them all.
func (d *Driver) attemptStatement(ctx context.Context, wait bool, reqs []driver.Request, keys []lockKeys, run func(s *session) (result, bool, error)) (*lease, int, outcome, error) {
	for {
		s, err := d.sessions.get(ctx, wait)
		if err != nil {
			return nil, 0, 0, err
		}
		started := time.Now()
		res, cancelled, err := run(s)
		if err != nil {
			if !cancelled && ctx.Err() == nil && s.reused && !isServerError(err) && !errors.Is(err, ErrSessionChanged) {
				// The idle connection had died (a server restart, an
				// administrator, a network failure): its session, and
				// anything the statement did in it, is gone. Try the next.
				d.sessions.drop(s)
				continue
			}
			d.undo(s)
			return nil, 0, 0, err
		}
		if !res.ok || res.pid != s.pid {
			// The statement acted on no lock (its marker check failed),
			// or on a session that is not ours: drop the connection,
			// which ends that session if it is ours after all.
			d.sessions.drop(s)
			if !res.ok {
				return nil, 0, 0, sessionChanged("a statement reached a server session that is not the driver's (backend %d, the driver set up %d)", res.pid, s.pid)
			}
			return nil, 0, 0, sessionChanged("the backend process changed from %d to %d", s.pid, res.pid)
		}
		if cancelled {
			// ctx ended while the statement ran: whatever it got is
			// given back before the caller hears of the cancellation.
			if res.held {
				d.racedGrants.Add(1)
			}
			d.undo(s)
			return nil, 0, 0, ctx.Err()
		}
		if !res.held {
			d.sessions.put(s)
			if res.got {
				return nil, 0, blocked, nil
			}
			return nil, 0, locked, nil
		}
		if res.index < 0 || res.index >= len(reqs) {
			d.undo(s)
			return nil, 0, 0, fmt.Errorf("postgres: the acquisition statement granted request %d of %d", res.index, len(reqs))
		}
		req := reqs[res.index]
		validity := req.TTL
		if wait {
			// Only a wait in the queue adds to the TTL (requirement 4):
			// a try's own run time is not a wait, and its validity is
			// the TTL, as the contract bounds it.
			validity += min(res.waited, time.Since(started))
		}
		return d.newLease(s, req, keys[res.index], res.token, validity, started), res.index, granted, nil
	}
}

// result is what an acquisition statement reports.
type result struct {
	ok, got, held bool
	// index is the request granted, among those of an AcquireAny; 0 for
	// the one request of an Acquire.
	index  int
	token  uint64
	waited time.Duration // from the statement's arrival to the grant
	pid    uint32
}

// run executes the acquisition statement of req on s.
func (d *Driver) run(ctx context.Context, s *session, req driver.Request, k lockKeys, wait bool) (result, bool, error) {
	want := idleParam(s, req.TTL)
	if req.Owner != "" {
		return d.runOwner(ctx, s, req, k, want)
	}
	// A session that has the TTL already (its previous lease's) is left
	// alone: the server restarts the idle timer at the end of every
	// statement all the same.
	idle := want
	if want != "" && want == s.applied {
		idle = ""
	}
	var (
		st     statement
		params [][]byte
		oids   []uint32
	)
	switch {
	case req.Mode == driver.Shared:
		st = d.stmts.tryShared
		if wait {
			st = d.stmts.lockShared
		}
		params = [][]byte{int8Bytes(k.main), int8Bytes(k.ownerGroups), []byte(s.marker), []byte(idle)}
		oids = []uint32{oidInt8, oidInt8, oidText, oidText}
	default:
		st = d.stmts.tryExclusive
		if wait {
			st = d.stmts.lockExclusive
		}
		params = [][]byte{int8Bytes(k.main), int8Bytes(k.ownerGroups), int8Bytes(k.sharedOwner), []byte(s.marker), []byte(idle)}
		oids = []uint32{oidInt8, oidInt8, oidInt8, oidText, oidText}
		if req.Value != "" {
			// The value is stored with the grant (see valueSQL). Values
			// come only with plain exclusive requests (elections'), so
			// shared and owner requests leave theirs aside.
			st = d.stmts.tryValue
			if wait {
				st = d.stmts.lockValue
			}
			params = append(params, []byte(req.Value))
			oids = append(oids, oidText)
		}
	}
	p := finishShort
	if wait {
		p = cancelWait
	}
	var row [][]byte
	cancelled, err := s.interruptible(ctx, p, func() error {
		var err error
		row, err = s.query(st, oids, params...)
		return err
	})
	if err != nil {
		s.applied = "" // the statement may or may not have set it
		if req.Value != "" && isCode(err, "42P01") {
			// undefined_table: a database migrated by an earlier version,
			// whose table of values this driver's role could not create.
			err = fmt.Errorf("%w (table %s, for values): %w", ErrMigration, valueName, err)
		}
		return result{}, cancelled, err
	}
	if req.Value == "" || req.Mode == driver.Shared {
		res, err := decodeFlatAcquire(row)
		s.idleAfter(res, err, want)
		return res, cancelled, err
	}
	res, err := decodeAcquire(row[:min(len(row), 9)])
	s.idleAfter(res, err, want)
	switch {
	case err != nil:
	case len(row) != 10:
		err = fmt.Errorf("postgres: acquire statement returned %d columns, want 10", len(row))
	case res.held && !decodeBool(row[9]):
		// The lock is held but its value could not be stored: the caller
		// undoes the grant rather than hold a lock that reports no value.
		err = fmt.Errorf("postgres: the value of the lock could not be stored: the advisory key that tags token %d is held by another application", res.token)
	}
	return res, cancelled, err
}

// runOwner executes the owner statement of req on s (see owner.go).
func (d *Driver) runOwner(ctx context.Context, s *session, req driver.Request, k lockKeys, idle string) (result, bool, error) {
	var row []string
	prev := s.applied
	s.applied = ""
	cancelled, err := s.interruptible(ctx, finishShort, func() error {
		var err error
		row, err = s.simple(context.Background(), d.ownerAcquireSQL(s, req, k, idle))
		return err
	})
	if err != nil {
		return result{}, cancelled, err
	}
	// The block sets the timeout only with a grant.
	s.applied = prev
	if len(row) == 1 && strings.HasPrefix(row[0], "held ") && idle != "" {
		s.applied = idle
	}
	if len(row) != 1 {
		return result{}, cancelled, fmt.Errorf("postgres: owner statement returned %d columns, want 1", len(row))
	}
	f := strings.Fields(row[0])
	pid := func(s string) uint32 {
		v, _ := strconv.ParseUint(s, 10, 32)
		return uint32(v)
	}
	switch {
	case len(f) == 3 && f[0] == "held":
		tok, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return result{}, cancelled, fmt.Errorf("postgres: owner statement returned token %q", f[1])
		}
		return result{ok: true, got: true, held: true, token: tok, pid: pid(f[2])}, cancelled, nil
	case len(f) == 2 && f[0] == "locked":
		return result{ok: true, pid: pid(f[1])}, cancelled, nil
	case len(f) == 2 && f[0] == "session":
		return result{pid: pid(f[1])}, cancelled, nil
	}
	return result{}, cancelled, fmt.Errorf("postgres: owner statement returned %q", row[0])
}

// undo gives back whatever an acquisition statement whose outcome is not
// wanted may have taken (a session-level lock survives the failure of the
// statement that took it), and keeps the connection when that works.
func (d *Driver) undo(s *session) {
	if !s.healthy() {
		d.sessions.drop(s)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cancelGrace)
	defer cancel()
	for range 3 {
		err := releaseSession(ctx, d, s, finishShort, false)
		switch {
		case err == nil:
			d.sessions.put(s)
			return
		case isCode(err, "57014") && s.healthy():
			// A cancel request that was meant for the acquisition
			// reached the server late and cancelled this instead.
			continue
		}
		break
	}
	d.sessions.drop(s)
}

// releaseSession runs the release statement on s: it ends every
// session-level advisory lock of the session and restores its
// idle_session_timeout, unless it has it already or lazy is set and it may
// keep a lease's until the idle list restores it (see session.lazyRestore).
func releaseSession(ctx context.Context, d *Driver, s *session, p policy, lazy bool) error {
	restore := s.idle
	if s.applied == s.idle || (lazy && s.lazyRestore()) {
		restore = ""
	}
	var row [][]byte
	_, err := s.interruptible(ctx, p, func() error {
		var err error
		row, err = s.query(d.stmts.release, []uint32{oidText, oidText}, []byte(s.marker), []byte(restore))
		return err
	})
	if err != nil {
		s.applied = ""
		return err
	}
	if len(row) == 0 || !decodeBool(row[0]) {
		return sessionChanged("the release statement reached a server session that is not the driver's")
	}
	if restore != "" {
		s.applied = s.idle
	}
	return nil
}

// idleAfter records the idle_session_timeout that an acquisition statement
// which did not fail left on s: want when it holds the lock (set now, or
// already there).
func (s *session) idleAfter(res result, err error, want string) {
	switch {
	case err != nil:
		s.applied = ""
	case res.held && want != "":
		s.applied = want
	}
}

// idleParam is the idle_session_timeout that makes the server end s's
// session when the lease is not renewed within ttl: ttl rounded up to whole
// milliseconds, so that the server never ends it early; "0" (no timeout)
// beyond what the setting can hold (24.8 days), where the client-side expiry
// alone ends the session; "" on servers without the setting.
func idleParam(s *session, ttl time.Duration) string {
	if s.idle == "" {
		return ""
	}
	ms := (ttl + time.Millisecond - 1) / time.Millisecond
	if ms > math.MaxInt32 {
		return "0"
	}
	return strconv.FormatInt(int64(ms), 10)
}

func int8Bytes(v int64) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(v))
}

func decodeBool(b []byte) bool { return len(b) == 1 && b[0] == 1 }

func decodeInt8(b []byte) (int64, bool) {
	if len(b) != 8 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(b)), true
}

func decodeInt4(b []byte) (int32, bool) {
	if len(b) != 4 {
		return 0, false
	}
	return int32(binary.BigEndian.Uint32(b)), true
}

// decodeAcquire reads the row of an acquire statement (see acquireSQL).
func decodeAcquire(row [][]byte) (result, error) {
	if len(row) != 9 {
		return result{}, fmt.Errorf("postgres: acquire statement returned %d columns, want 9", len(row))
	}
	res := result{ok: decodeBool(row[0]), got: decodeBool(row[1]), held: decodeBool(row[2])}
	if pid, ok := decodeInt4(row[8]); ok {
		res.pid = uint32(pid)
	}
	if res.held {
		tok, ok := decodeInt8(row[4])
		if !ok || tok <= 0 {
			return result{}, fmt.Errorf("postgres: acquire statement returned no valid token")
		}
		res.token = uint64(tok)
	}
	// timestamptz in binary: microseconds since 2000-01-01, as int8. Only
	// their difference matters.
	arrived, ok1 := decodeInt8(row[6])
	granted, ok2 := decodeInt8(row[7])
	if ok1 && ok2 && granted > arrived {
		res.waited = time.Duration(granted-arrived) * time.Microsecond
	}
	return res, nil
}

// decodeFlatAcquire reads the row of a flat acquire statement (see
// flatAcquireSQL).
func decodeFlatAcquire(row [][]byte) (result, error) {
	if len(row) != 2 {
		return result{}, fmt.Errorf("postgres: acquire statement returned %d columns, want 2", len(row))
	}
	var res result
	if pid, ok := decodeInt4(row[1]); ok {
		res.pid = uint32(pid)
	}
	o, err := decodeInt8Array(row[0])
	if err != nil || len(o) == 0 {
		return result{}, fmt.Errorf("postgres: acquire statement returned an outcome of %d bytes: %v", len(row[0]), err)
	}
	switch {
	case o[0] == -1:
	case o[0] == 0:
		res.ok = true
	case o[0] == -2:
		res.ok, res.got = true, true
	case o[0] > 0 && len(o) == 3:
		res.ok, res.got, res.held = true, true, true
		res.token = uint64(o[0])
		if o[1] > 0 {
			res.waited = time.Duration(o[1]) * time.Microsecond
		}
	default:
		return result{}, fmt.Errorf("postgres: acquire statement returned no valid token (%v)", o)
	}
	return res, nil
}

// decodeInt8Array reads a one-dimensional int8[] in binary format (the
// number of dimensions, a has-nulls flag, the element type, then per
// dimension its length and lower bound, then each element as its length
// and its bytes). NULL elements read as 0.
func decodeInt8Array(b []byte) ([]int64, error) {
	be := binary.BigEndian
	if len(b) < 12 {
		return nil, errors.New("short array header")
	}
	ndim, elem := be.Uint32(b[0:4]), be.Uint32(b[8:12])
	if elem != oidInt8 {
		return nil, fmt.Errorf("array of type %d, want int8", elem)
	}
	if ndim == 0 {
		return nil, nil
	}
	if ndim != 1 || len(b) < 20 {
		return nil, fmt.Errorf("array of %d dimensions, want 1", ndim)
	}
	n := int(be.Uint32(b[12:16]))
	b = b[20:]
	if n < 0 || n > len(b)/4 {
		return nil, fmt.Errorf("array of %d elements in %d bytes", n, len(b))
	}
	out := make([]int64, n)
	for i := range out {
		if len(b) < 4 {
			return nil, errors.New("short array")
		}
		size := int32(be.Uint32(b[0:4]))
		b = b[4:]
		if size == -1 {
			continue
		}
		if size != 8 || len(b) < 8 {
			return nil, fmt.Errorf("array element of %d bytes, want 8", size)
		}
		out[i] = int64(be.Uint64(b[0:8]))
		b = b[8:]
	}
	return out, nil
}
