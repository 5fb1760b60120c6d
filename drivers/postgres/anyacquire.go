package postgres

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/dlock-go/dlock/driver"
)

var _ driver.AnyAcquirer = (*Driver)(nil)

// AcquireAny takes the first free lock among reqs (driver.AnyAcquirer), in
// one statement on one connection: it tries the requests' advisory keys in
// order, each exactly as a try (Acquire without Request.Block) tries its
// one key, and stops at the first grant, which it returns with its index.
// The lease is the one Acquire(reqs[i]) would have returned: the same
// session of its own, the same fencing token from dlock_fence, the same
// server-side expiry, heartbeat and release. When every lock is held (or
// has an owner group in the way) it returns driver.ErrLocked with no retry
// hint, as Acquire does: PostgreSQL does not tell when a session will end.
//
// When ctx ends while the statement runs, or the statement fails, the
// session is undone as an Acquire's is: its locks are unlocked and the
// connection kept, or the connection is closed, which ends the session and
// whatever it took. Requests that are not plain exclusive tries (the core
// sends none) are tried one Acquire at a time, as the contract describes.
func (d *Driver) AcquireAny(ctx context.Context, reqs []driver.Request) (driver.Lease, int, error) {
	if err := d.enter(ctx); err != nil {
		return nil, 0, err
	}
	for _, req := range reqs {
		if req.Mode != driver.Exclusive || req.Block || req.Owner != "" || req.Value != "" {
			return d.acquireEach(ctx, reqs)
		}
	}
	if len(reqs) == 0 {
		return nil, 0, driver.ErrLocked
	}
	keys := make([]lockKeys, len(reqs))
	for i, req := range reqs {
		keys[i] = keysOf(req.Key, "", false)
	}
	l, i, out, err := d.attemptStatement(ctx, false, reqs, keys, func(s *session) (result, bool, error) {
		return d.runAny(ctx, s, reqs, keys)
	})
	switch {
	case err != nil:
		return nil, 0, d.opErr(ctx, err)
	case out != granted:
		return nil, 0, driver.ErrLocked
	}
	return l, i, nil
}

// acquireEach is AcquireAny for requests the statement does not take
// (shared, reentrant, blocking or with a value): Acquire with each in turn,
// until one is granted or fails otherwise than with ErrLocked.
func (d *Driver) acquireEach(ctx context.Context, reqs []driver.Request) (driver.Lease, int, error) {
	for i, req := range reqs {
		l, err := d.Acquire(ctx, req)
		if err == nil {
			return l, i, nil
		}
		if !errors.Is(err, driver.ErrLocked) {
			return nil, 0, err
		}
	}
	return nil, 0, driver.ErrLocked
}

// runAny executes the any statement (anySQL) for reqs, whose keys are keys,
// on s.
func (d *Driver) runAny(ctx context.Context, s *session, reqs []driver.Request, keys []lockKeys) (result, bool, error) {
	main := make([]int64, len(reqs))
	groups := make([]int64, len(reqs))
	sharedGroups := make([]int64, len(reqs))
	idle := make([]string, len(reqs))
	for i, k := range keys {
		main[i], groups[i], sharedGroups[i] = k.main, k.ownerGroups, k.sharedOwner
		idle[i] = idleParam(s, reqs[i].TTL)
	}
	var row [][]byte
	prev := s.applied
	s.applied = ""
	cancelled, err := s.interruptible(ctx, finishShort, func() error {
		var err error
		row, err = s.query(d.stmts.tryAny, []uint32{oidInt8Array, oidInt8Array, oidInt8Array, oidText, oidTextArray},
			int8Array(main), int8Array(groups), int8Array(sharedGroups), []byte(s.marker), textArray(idle))
		return err
	})
	if err != nil {
		return result{}, cancelled, err
	}
	res, err := decodeAny(row)
	// The statement sets the timeout only with a grant.
	s.applied = prev
	if err == nil && res.held && res.index >= 0 && res.index < len(idle) {
		s.idleAfter(res, nil, idle[res.index])
	} else if err != nil {
		s.applied = ""
	}
	return res, cancelled, err
}

// decodeAny reads the row of the any statement (see anySQL).
func decodeAny(row [][]byte) (result, error) {
	if len(row) != 8 {
		return result{}, fmt.Errorf("postgres: any statement returned %d columns, want 8", len(row))
	}
	// Its columns are those of acquireSQL, less got and undone, plus the
	// index: decodeAcquire reads them once put in its places.
	res, err := decodeAcquire([][]byte{row[0], row[1], row[1], nil, row[3], row[4], row[5], row[6], row[7]})
	if err != nil || !res.held {
		return res, err
	}
	i, ok := decodeInt4(row[2])
	if !ok {
		return result{}, errors.New("postgres: any statement returned no index for its grant")
	}
	res.index = int(i)
	return res, nil
}

// anySQL is the statement of AcquireAny. It takes the arrays of the
// requests' lock keys ($1) and of the derived keys to probe ($2, $3: those
// of exclusive and of shared owner groups), the session marker ($4), and
// the array of idle_session_timeout settings to apply for each request when
// it is granted ($5, "" to leave it). It returns one row:
//
//	ok      bool  the session is the driver's (the marker matches)
//	held    bool  a lock was granted, and no owner group stood in the way
//	idx     int4  the 0-based index of the request granted, when held
//	token   int8  the fencing token, when held
//	idle    text  the setting applied, when held
//	arrived timestamptz  when the statement arrived (statement_timestamp)
//	granted timestamptz  clock_timestamp after the grant
//	pid     int4         the backend process
//
// It takes at most one lock, by what PostgreSQL documents rather than by
// what its planner happens to do:
//
//   - the tries run in the recursive CTE t, one per iteration. PostgreSQL
//     evaluates a recursive query by iterations: the non-recursive term
//     fills the working table, and each iteration evaluates the recursive
//     term over the working table that the previous one left, until an
//     iteration leaves it empty (the documentation's "Recursive Query
//     Evaluation", in "WITH Queries"). The non-recursive term leaves one
//     row, (0, 0), only when the marker matches, and each iteration reads
//     that one row and leaves at most one: key i+1's outcome, only when the
//     row of key i says "not granted" (state 0) and keys remain. A grant
//     (state 1) therefore leaves nothing to iterate over;
//   - inside an iteration the side effects are ordered by CASE, which
//     evaluates a THEN branch only after its condition and only when it
//     holds ("Expression Evaluation Rules"; its exceptions, aggregates and
//     constant subexpressions folded at planning, do not apply to volatile
//     functions of a column): a try runs only when the row read allows it
//     (the WHERE says the same, but a WHERE's order is not promised), the
//     probes only after the lock was granted, and the unlock only when a
//     probe failed (an owner group holds the key: as a plain try does, the
//     statement gives the lock back and goes on to the next key);
//   - the aggregate in g reads every row of t, so the iterations all run
//     (PostgreSQL evaluates a WITH query only as far as it is read), and it
//     yields one row whatever happened; the outer level, over g through
//     OFFSET 0 as in acquireSQL, draws the token and sets the idle timeout
//     only when the aggregate found a grant, in CASE branches.
//
// A recursive CTE is never inlined into the query that reads it, so t runs
// once; c, read twice, is computed once too.
func anySQL(fence string) string {
	return `WITH RECURSIVE c AS (
  SELECT current_setting('dlock.session', true) IS NOT DISTINCT FROM $4::text AS ok),
t(i, state) AS (
  SELECT 0, 0 FROM c WHERE c.ok
  UNION ALL
  SELECT t.i + 1,
    CASE WHEN t.state = 0 AND t.i < cardinality($1::int8[]) THEN
      CASE WHEN pg_try_advisory_lock(($1::int8[])[t.i + 1]) THEN
        CASE WHEN pg_try_advisory_xact_lock(($2::int8[])[t.i + 1]) AND pg_try_advisory_xact_lock(($3::int8[])[t.i + 1]) THEN 1
          WHEN pg_advisory_unlock(($1::int8[])[t.i + 1]) THEN 0
          ELSE 0 END
      ELSE 0 END
    END
  FROM t WHERE t.state = 0 AND t.i < cardinality($1::int8[])),
g AS (SELECT max(t.i) FILTER (WHERE t.state = 1) AS won FROM t)
SELECT r.ok, r.won IS NOT NULL AS held, r.won - 1 AS idx,
  CASE WHEN r.won IS NOT NULL THEN nextval('` + fence + `') END AS token,
  CASE WHEN r.won IS NOT NULL AND ($5::text[])[r.won] <> '' THEN set_config('idle_session_timeout', ($5::text[])[r.won], false) END AS idle,
  statement_timestamp() AS arrived, clock_timestamp() AS granted,
  pg_backend_pid() AS pid
FROM (SELECT c.ok, g.won FROM c, g OFFSET 0) r`
}

// Array type OIDs, for the any statement's parameters.
const (
	oidInt8Array = 1016
	oidTextArray = 1009
)

// int8Array encodes vs as a one-dimensional int8[] in PostgreSQL's binary
// format: dimensions, null flag and element type, then each dimension's
// length and lower bound, then each element's length and bytes.
func int8Array(vs []int64) []byte {
	b := arrayHeader(len(vs), oidInt8)
	for _, v := range vs {
		b = binary.BigEndian.AppendUint32(b, 8)
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	return b
}

// textArray encodes vs as a one-dimensional text[] (see int8Array).
func textArray(vs []string) []byte {
	b := arrayHeader(len(vs), oidText)
	for _, v := range vs {
		b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
		b = append(b, v...)
	}
	return b
}

func arrayHeader(n int, elem uint32) []byte {
	b := binary.BigEndian.AppendUint32(nil, 1) // dimensions
	b = binary.BigEndian.AppendUint32(b, 0)    // no nulls
	b = binary.BigEndian.AppendUint32(b, elem)
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	return binary.BigEndian.AppendUint32(b, 1) // lower bound
}
