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
// queue. Owner, Token and TTL are not known: the driver keeps owners only as
// hashes, tokens come from one sequence for every key, and a lock lasts as
// long as its session. Waiters does not count reentrant requests and plain
// ones blocked by an owner group, which poll instead of queueing.
func (d *Driver) Inspect(ctx context.Context, key string) (driver.Info, error) {
	if err := d.enter(ctx); err != nil {
		return driver.Info{}, err
	}
	if err := validateKey(key); err != nil {
		return driver.Info{}, err
	}
	k := keysOf(key, "", false)
	half := func(id int64) string {
		return "(" + strconv.FormatUint(uint64(id)>>32, 10) + ", " + strconv.FormatUint(uint64(id)&0xffffffff, 10) + ")"
	}
	is := func(id int64) string {
		return "(classid::int8, objid::int8) = " + half(id)
	}
	sql := fmt.Sprintf(`SELECT
  count(*) FILTER (WHERE granted AND %[1]s AND mode = 'ExclusiveLock')::text,
  count(*) FILTER (WHERE granted AND %[1]s AND mode = 'ShareLock')::text,
  count(*) FILTER (WHERE NOT granted AND %[1]s)::text,
  count(*) FILTER (WHERE granted AND %[2]s AND mode = 'ShareLock')::text,
  count(*) FILTER (WHERE granted AND %[3]s AND mode = 'ShareLock')::text
FROM pg_catalog.pg_locks
WHERE locktype = 'advisory' AND objsubid = 1
  AND (classid::int8, objid::int8) IN (%[4]s, %[5]s, %[6]s)`,
		is(k.main), is(k.ownerGroups), is(k.sharedOwner), half(k.main), half(k.ownerGroups), half(k.sharedOwner))
	s, err := d.sessions.get(ctx, true)
	if err != nil {
		return driver.Info{}, d.opErr(ctx, err)
	}
	var row []string
	_, err = s.interruptible(ctx, finishShort, func() error {
		var err error
		row, err = s.simple(context.Background(), sql)
		return err
	})
	if err != nil {
		d.sessions.drop(s)
		return driver.Info{}, d.opErr(ctx, err)
	}
	d.sessions.put(s)
	if len(row) != 5 {
		return driver.Info{}, fmt.Errorf("postgres: inspect returned %d columns, want 5", len(row))
	}
	n := make([]int, 5)
	for i, v := range row {
		n[i], _ = strconv.Atoi(v)
	}
	exclusive, shared, waiting, exclGroup, sharedGroup := n[0], n[1], n[2], n[3], n[4]
	info := driver.Info{Waiters: waiting}
	switch {
	case exclusive > 0:
		info.Held, info.Mode, info.Holders = true, driver.Exclusive, exclusive
	case exclGroup > 0:
		info.Held, info.Mode, info.Holders = true, driver.Exclusive, exclGroup
	case shared+sharedGroup > 0:
		info.Held, info.Mode, info.Holders = true, driver.Shared, shared+sharedGroup
	}
	return info, nil
}
