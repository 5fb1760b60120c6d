package postgres

import (
	"context"
	"fmt"
	"strconv"

	"github.com/dlock-go/dlock/driver"
)

// Inspect describes the lock key from pg_locks, without taking it: whether
// it is held, in which mode, by how many sessions (readers, or the members
// of an owner group), and how many sessions wait for it in PostgreSQL's
// queue. For a hold taken with a value (an election's leader), it reports
// the value and the hold's fencing token, from the row the grant's
// statement wrote (see valueSQL), read in the same
// statement as one snapshot of pg_locks, in which the row's backend must
// hold both the lock and the tag of the row's token: so never the row of a
// hold that has ended. For other holds Owner and Token are not known: the
// driver keeps owners only as hashes, tokens come from one sequence for
// every key. TTL is zero: a lock lasts as long as its session. Waiters does
// not count reentrant requests and plain ones blocked by an owner group,
// which poll instead of queueing.
func (d *Driver) Inspect(ctx context.Context, key string) (driver.Info, error) {
	if err := d.enter(ctx); err != nil {
		return driver.Info{}, err
	}
	if err := validateKey(key); err != nil {
		return driver.Info{}, err
	}
	k := keysOf(key, "", false)
	s, err := d.sessions.get(ctx, true)
	if err != nil {
		return driver.Info{}, d.opErr(ctx, err)
	}
	row, err := inspectRow(ctx, s, d.inspectSQL(k, true))
	if isCode(err, "42P01") {
		// A database migrated by an earlier version, without the table
		// of values (see migrate): nothing can hold a value there.
		row, err = inspectRow(ctx, s, d.inspectSQL(k, false))
	}
	if err != nil {
		d.sessions.drop(s)
		return driver.Info{}, d.opErr(ctx, err)
	}
	d.sessions.put(s)
	if len(row) != 7 {
		return driver.Info{}, fmt.Errorf("postgres: inspect returned %d columns, want 7", len(row))
	}
	n := make([]int, 5)
	for i, v := range row[:5] {
		n[i], _ = strconv.Atoi(v)
	}
	exclusive, shared, waiting, exclGroup, sharedGroup := n[0], n[1], n[2], n[3], n[4]
	info := driver.Info{Waiters: waiting}
	switch {
	case exclusive > 0:
		info.Held, info.Mode, info.Holders = true, driver.Exclusive, exclusive
		if tok, err := strconv.ParseUint(row[5], 10, 64); err == nil && tok > 0 {
			info.Token, info.Value = tok, row[6]
		}
	case exclGroup > 0:
		info.Held, info.Mode, info.Holders = true, driver.Exclusive, exclGroup
	case shared+sharedGroup > 0:
		info.Held, info.Mode, info.Holders = true, driver.Shared, shared+sharedGroup
	}
	return info, nil
}

// inspectRow runs Inspect's statement sql on s.
func inspectRow(ctx context.Context, s *session, sql string) ([]string, error) {
	var row []string
	_, err := s.interruptible(ctx, finishShort, func() error {
		var err error
		row, err = s.simple(context.Background(), sql)
		return err
	})
	return row, err
}

// inspectSQL is Inspect's statement for the keys k: five counts of
// pg_locks, then the token and value of the hold with a value ("" and ""
// when there is none, or when withValues is false, for a database without
// the table of values). pg_locks is read once, in the CTE l, so that the
// counts and the check of the value's hold see one snapshot of the lock
// table: a CTE read more than once is materialized (without the keyword
// MATERIALIZED, which needs PostgreSQL 12), and read only once (without
// values) it is one snapshot anyway.
func (d *Driver) inspectSQL(k lockKeys, withValues bool) string {
	half := func(id int64) string {
		return "(" + strconv.FormatUint(uint64(id)>>32, 10) + ", " + strconv.FormatUint(uint64(id)&0xffffffff, 10) + ")"
	}
	is := func(id int64) string {
		return "(hi, lo) = " + half(id)
	}
	cols, join := `'', ''`, ""
	if withValues {
		// The row counts only while its backend holds the lock and its
		// token's tag (see valueSQL), both in the snapshot above.
		cols = `coalesce(v.token::text, ''), coalesce(v.value, '')`
		join = fmt.Sprintf(`
LEFT JOIN (SELECT x.token, x.value FROM %[1]s x
  WHERE x.gkey = %[2]d
    AND EXISTS (SELECT 1 FROM l WHERE l.sub = 1 AND l.granted AND l.mode = 'ExclusiveLock'
      AND %[3]s AND l.pid = x.pid)
    AND EXISTS (SELECT 1 FROM l WHERE l.sub = 2 AND l.granted AND l.pid = x.pid
      AND l.hi = ((x.token >> 32) # %[4]d) & 4294967295 AND l.lo = x.token & 4294967295)) v ON true`,
			d.valueTable, k.main, is(k.main), tagClass)
	}
	return fmt.Sprintf(`WITH l AS (
  SELECT classid::int8 AS hi, objid::int8 AS lo, objsubid AS sub, mode, granted, pid
  FROM pg_catalog.pg_locks WHERE locktype = 'advisory'),
c AS (SELECT
  count(*) FILTER (WHERE granted AND %[1]s AND mode = 'ExclusiveLock')::text AS excl,
  count(*) FILTER (WHERE granted AND %[1]s AND mode = 'ShareLock')::text AS shared,
  count(*) FILTER (WHERE NOT granted AND %[1]s)::text AS waiting,
  count(*) FILTER (WHERE granted AND %[2]s AND mode = 'ShareLock')::text AS exclgroup,
  count(*) FILTER (WHERE granted AND %[3]s AND mode = 'ShareLock')::text AS sharedgroup
  FROM l WHERE sub = 1 AND (hi, lo) IN (%[4]s, %[5]s, %[6]s))
SELECT c.excl, c.shared, c.waiting, c.exclgroup, c.sharedgroup, %[7]s
FROM c%[8]s`,
		is(k.main), is(k.ownerGroups), is(k.sharedOwner), half(k.main), half(k.ownerGroups), half(k.sharedOwner), cols, join)
}
