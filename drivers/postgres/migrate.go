package postgres

import (
	"context"
	"fmt"
	"strings"
)

// Migration is the SQL that creates the driver's three database objects in
// the schema "public" (see "Migration" in the package documentation). The
// driver runs the equivalent itself, in the schema [WithSchema] names, the
// first time it finds them missing; run this (with the schema changed as
// needed) as a role that may create objects when the driver's own role may
// not. It only creates what is missing, so it also upgrades a database
// migrated by an earlier version (which had no dlock_values).
const Migration = `CREATE SEQUENCE IF NOT EXISTS public.dlock_fence AS bigint;
CREATE UNLOGGED TABLE IF NOT EXISTS public.dlock_owner_groups (
	gkey  bigint PRIMARY KEY,
	token bigint NOT NULL
);
CREATE UNLOGGED TABLE IF NOT EXISTS public.dlock_values (
	gkey  bigint PRIMARY KEY,
	token bigint NOT NULL,
	value text NOT NULL,
	pid   integer NOT NULL
);`

// migrationKey is the advisory key that serialises the driver's own
// migrations (CREATE ... IF NOT EXISTS races with itself in PostgreSQL).
var migrationKey = derivedKey("migration", "", "")

// migrationSQL is Migration for the schema of o.
func migrationSQL(o options) string {
	return fmt.Sprintf(`CREATE SEQUENCE IF NOT EXISTS %s AS bigint;
CREATE UNLOGGED TABLE IF NOT EXISTS %s (gkey bigint PRIMARY KEY, token bigint NOT NULL);
CREATE UNLOGGED TABLE IF NOT EXISTS %s (gkey bigint PRIMARY KEY, token bigint NOT NULL, value text NOT NULL, pid integer NOT NULL);`,
		o.qualified(fenceName), o.qualified(groupName), o.qualified(valueName))
}

// migrate creates the driver's objects on pg unless they exist: a lookup
// when they do, and otherwise one transaction under an advisory lock.
//
// A database migrated by an earlier version has every object but the table
// of values. When the driver's role may not create it, the database stays
// usable as before: migrate returns nil, locks work, and only what needs
// the table fails (an acquisition with a value, with an error wrapping
// ErrMigration; Inspect reports no values), until [Migration] is run.
func migrate(ctx context.Context, s *session, o options) error {
	lit := func(name string) string { return "'" + strings.ReplaceAll(o.qualified(name), "'", "''") + "'" }
	row, err := s.simple(ctx, `SELECT (to_regclass(`+lit(fenceName)+`) IS NOT NULL AND to_regclass(`+lit(groupName)+`) IS NOT NULL)::text,
  (to_regclass(`+lit(valueName)+`) IS NOT NULL)::text`)
	if err != nil {
		return err
	}
	if len(row) != 2 {
		return fmt.Errorf("postgres: the migration's lookup returned %d columns, want 2", len(row))
	}
	if row[0] == "true" && row[1] == "true" {
		return nil
	}
	earlier := row[0] == "true" // only the table of values is missing
	sql := "BEGIN; SELECT pg_advisory_xact_lock(" + itoa(migrationKey) + "); " + migrationSQL(o) + " COMMIT;"
	if _, err := s.pg.Exec(ctx, sql).ReadAll(); err != nil {
		if s.pg.TxStatus() != 'I' {
			_, _ = s.pg.Exec(ctx, "ROLLBACK").ReadAll()
		}
		if isServerError(err) {
			if earlier {
				return nil
			}
			return fmt.Errorf("%w: %w", ErrMigration, err)
		}
		return err
	}
	return nil
}
