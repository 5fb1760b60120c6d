package postgres

import (
	"context"
	"fmt"
	"strings"
)

// Migration is the SQL that creates the driver's two database objects in the
// schema "public" (see "Migration" in the package documentation). The driver
// runs the equivalent itself, in the schema [WithSchema] names, the first
// time it finds them missing; run this (with the schema changed as needed)
// as a role that may create objects when the driver's own role may not.
const Migration = `CREATE SEQUENCE IF NOT EXISTS public.dlock_fence AS bigint;
CREATE UNLOGGED TABLE IF NOT EXISTS public.dlock_owner_groups (
	gkey  bigint PRIMARY KEY,
	token bigint NOT NULL
);`

// migrationKey is the advisory key that serialises the driver's own
// migrations (CREATE ... IF NOT EXISTS races with itself in PostgreSQL).
var migrationKey = derivedKey("migration", "", "")

// migrationSQL is Migration for the schema of o.
func migrationSQL(o options) string {
	return fmt.Sprintf(`CREATE SEQUENCE IF NOT EXISTS %s AS bigint;
CREATE UNLOGGED TABLE IF NOT EXISTS %s (gkey bigint PRIMARY KEY, token bigint NOT NULL);`,
		o.qualified(fenceName), o.qualified(groupName))
}

// migrate creates the driver's objects on pg unless they exist: a lookup
// when they do, and otherwise one transaction under an advisory lock.
func migrate(ctx context.Context, s *session, o options) error {
	lit := func(name string) string { return "'" + strings.ReplaceAll(o.qualified(name), "'", "''") + "'" }
	row, err := s.simple(ctx, `SELECT (to_regclass(`+lit(fenceName)+`) IS NOT NULL AND to_regclass(`+lit(groupName)+`) IS NOT NULL)::text`)
	if err != nil {
		return err
	}
	if len(row) == 1 && row[0] == "true" {
		return nil
	}
	sql := "BEGIN; SELECT pg_advisory_xact_lock(" + itoa(migrationKey) + "); " + migrationSQL(o) + " COMMIT;"
	if _, err := s.pg.Exec(ctx, sql).ReadAll(); err != nil {
		if s.pg.TxStatus() != 'I' {
			_, _ = s.pg.Exec(ctx, "ROLLBACK").ReadAll()
		}
		if isServerError(err) {
			return fmt.Errorf("%w: %w", ErrMigration, err)
		}
		return err
	}
	return nil
}
