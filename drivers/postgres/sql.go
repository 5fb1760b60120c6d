package postgres

import (
	"fmt"
	"strconv"
	"strings"
)

// The SQL the driver runs. Every statement that acts on a session first
// checks the session's marker (the custom setting dlock.session, which the
// driver sets to a random value of its own when it takes the connection), so
// that nothing is ever locked or unlocked on a server session that is not the
// one the driver set up (see ErrSessionChanged).
//
// PostgreSQL does not promise an order of evaluation inside one target list
// or boolean expression, and may fold "f() AND false" without calling f. The
// acquire statements therefore chain subqueries with OFFSET 0 (which the
// planner neither flattens nor reorders): each level is computed from the
// one inside it, and every side effect sits in a CASE branch, which is only
// evaluated when its condition holds. Each level's columns are also read by
// the outer query, so that none is dropped as unused. The statements run at
// every acquisition and release (flatAcquireSQL, release) order their steps
// by the WHEN conditions of one CASE instead, which costs the server less.

// statement is one prepared statement: its name on every connection, and its
// text.
type statement struct {
	name string
	sql  string
}

// Parameter and result type OIDs.
const (
	oidInt8 = 20
	oidText = 25
)

// The acquire statements take, in order: the lock key, the derived keys to
// probe (none, one or two), the session marker, and the idle_session_timeout
// to set when the lock is granted ("" to leave it). They return one row:
//
//	ok      bool  the session is the driver's (the marker matches)
//	got     bool  the lock itself was granted
//	held    bool  granted, and no owner group stood in the way
//	undone  text  non-NULL when the lock was granted but given back at once
//	token   int8  the fencing token, when held
//	idle    text  the setting applied, when held
//	arrived timestamptz  when the statement arrived (statement_timestamp)
//	granted timestamptz  when the lock was granted (clock_timestamp after it)
//	pid     int4         the backend process
func acquireSQL(lockFn, unlockFn string, probes []string, nprobes int, fence string) string {
	marker := fmt.Sprintf("$%d", 2+nprobes)
	idle := fmt.Sprintf("$%d", 3+nprobes)
	free := "true"
	if len(probes) > 0 {
		free = strings.Join(probes, " AND ")
	}
	return `SELECT r.ok, r.got, r.held, r.undone,
  CASE WHEN r.held THEN nextval('` + fence + `') END AS token,
  CASE WHEN r.held AND ` + idle + `::text <> '' THEN set_config('idle_session_timeout', ` + idle + `::text, false) END AS idle,
  statement_timestamp() AS arrived, clock_timestamp() AS granted,
  pg_backend_pid() AS pid
FROM (SELECT p.ok, p.got, p.got AND p.free AS held,
    CASE WHEN p.got AND NOT p.free THEN ` + unlockFn + `($1)::text END AS undone
  FROM (SELECT l.ok, l.got, CASE WHEN l.got THEN ` + free + ` ELSE false END AS free
    FROM (SELECT c.ok, CASE WHEN c.ok THEN ` + lockFn + ` ELSE false END AS got
      FROM (SELECT current_setting('dlock.session', true) IS NOT DISTINCT FROM ` + marker + `::text AS ok OFFSET 0) c
      OFFSET 0) l
    OFFSET 0) p
  OFFSET 0) r`
}

// flatAcquireSQL is the acquire statement of plain requests without a value
// (the hot path: every Lock and TryLock of a Mutex or an RWMutex). It takes
// the parameters of acquireSQL and does the same, in the same order, but in
// one CASE expression instead of a chain of subqueries: CASE evaluates its
// WHEN conditions in order, and of its branches only the one chosen, and
// the planner never evaluates volatile functions (the locks, nextval,
// set_config, clock_timestamp) ahead of time. A chain of four subquery
// levels costs the server an executor node per level at every execution
// (about 15 µs of CPU per acquisition, measured with perf); this costs one.
// It returns two columns:
//
//	o   int8[]  {-1}: the session is not the driver's (the marker differs),
//	            and nothing was locked;
//	            {0}: the lock is held by someone else;
//	            {-2, _}: the lock was granted, but an owner group stood in the
//	            way, and it was given back at once;
//	            {token, waited, _}: held, with the fencing token and the
//	            microseconds from the statement's arrival to the grant
//	            (clock_timestamp, evaluated after the grant).
//	pid int4    the backend process
//
// The probes and the unlock that gives a blocked grant back only run once
// the lock is granted; the token, the idle timeout and the grant's time only
// once it is held.
func flatAcquireSQL(lockFn, unlockFn string, probes []string, nprobes int, fence string) string {
	marker := fmt.Sprintf("$%d", 2+nprobes)
	idle := fmt.Sprintf("$%d", 3+nprobes)
	free := "true"
	if len(probes) > 0 {
		free = strings.Join(probes, " AND ")
	}
	return `SELECT CASE
    WHEN current_setting('dlock.session', true) IS DISTINCT FROM ` + marker + `::text THEN '{-1}'::int8[]
    WHEN NOT ` + lockFn + ` THEN '{0}'::int8[]
    WHEN NOT (` + free + `) THEN ARRAY[-2, ` + unlockFn + `($1)::int]::int8[]
    ELSE ARRAY[nextval('` + fence + `'),
      (extract(epoch FROM clock_timestamp() - statement_timestamp()) * 1000000)::int8,
      CASE WHEN ` + idle + `::text <> '' THEN length(set_config('idle_session_timeout', ` + idle + `::text, false)) ELSE 0 END]
  END AS o,
  pg_backend_pid() AS pid`
}

// Values (driver.Capabilities.Values). An advisory lock carries no data,
// and pg_locks shows only which backend holds it, not which of its grants.
// So a plain exclusive acquisition with a value (the only kind the core
// sends one with: an election's) runs a statement of its own, which, in the
// same statement as the grant and only when the lock is held:
//
//   - takes, shared, the tag of the grant's token: the advisory key of the
//     two-int4 form (tagClass XOR the token's high 32 bits, the token's low
//     32 bits), which no other grant ever takes, as tokens are unique;
//   - writes the row (key, token, value, backend pid) of the table
//     dlock_values, replacing the key's earlier one.
//
// Inspect reports a row only when, in the same snapshot of pg_locks, its
// backend holds both the lock's key (exclusive) and the row's tag. A row is
// visible only once the grant's statement has committed, so its token is
// settled; and the tag ends with the hold (a release's
// pg_advisory_unlock_all, or the session's end), so the row of a hold that
// has ended, or of an earlier hold of the same backend, is never reported,
// whatever path ended it. Between the grant and the commit of its row the
// lock shows as held with no value and no token.

// tagClass is the high half, before the token's high 32 bits are mixed in,
// of the two-int4 advisory keys that tag grants: "dlkt" in ASCII, so that
// the tags are apart from applications' small numbers in that key space.
const tagClass = 0x646c6b74

// valueSQL wraps the acquire statement acquire (see acquireSQL) whose lock
// key is $1: when the lock is held it takes the token's tag and stores the
// row of value (parameter valueParam). It returns acquire's columns and a
// tenth, stored: whether the row was written (false when the lock was not
// held, or the tag was taken by someone else, which only an application
// using the tag's key space can do).
//
// Each CTE is computed once, before what reads it: a and t call volatile
// functions, which PostgreSQL never inlines into the query that reads them
// (it materializes them, as every CTE before PostgreSQL 12; the keyword
// MATERIALIZED, which says so, would need 12, and the sequence's AS bigint
// only needs 10), and the INSERT in v runs exactly once, whether or not the
// outer query reads it.
func valueSQL(acquire, valueParam, table string) string {
	return `WITH a AS (` + acquire + `),
t AS (SELECT a.*, CASE WHEN a.held THEN pg_try_advisory_lock_shared(
    ((a.token >> 32) # ` + strconv.Itoa(tagClass) + `)::bit(32)::int4, a.token::bit(32)::int4) ELSE false END AS tagged
  FROM a),
v AS (INSERT INTO ` + table + ` (gkey, token, value, pid)
  SELECT $1::int8, t.token, ` + valueParam + `::text, t.pid FROM t WHERE t.tagged
  ON CONFLICT (gkey) DO UPDATE SET token = EXCLUDED.token, value = EXCLUDED.value, pid = EXCLUDED.pid
  RETURNING 1)
SELECT t.ok, t.got, t.held, t.undone, t.token, t.idle, t.arrived, t.granted, t.pid,
  (SELECT count(*) FROM v) = 1 AS stored
FROM t`
}

// statements are the prepared statements of one Driver: their texts name
// the Driver's schema.
type statements struct {
	// tryExclusive, lockExclusive, tryShared and lockShared are
	// flatAcquireSQL's.
	tryExclusive, lockExclusive statement
	tryShared, lockShared       statement
	// tryValue and lockValue take the lock as tryExclusive and
	// lockExclusive do, for a request with a value (valueSQL over
	// acquireSQL), which is their sixth parameter.
	tryValue, lockValue statement
	// tryAny tries several exclusive locks in turn and takes the first
	// free one (anySQL, for AcquireAny).
	tryAny    statement
	release   statement
	heartbeat statement
}

func newStatements(o options) statements {
	fence := strings.ReplaceAll(o.qualified(fenceName), "'", "''")
	values := o.qualified(valueName)
	// A plain exclusive lock must find no owner group of either kind; a
	// plain shared lock, no exclusive owner group. The probes take the
	// derived keys exclusively for the rest of the statement only: they
	// fail while any member of such a group holds its shared lock.
	exclProbes := []string{"pg_try_advisory_xact_lock($2)", "pg_try_advisory_xact_lock($3)"}
	sharedProbes := []string{"pg_try_advisory_xact_lock($2)"}
	// pg_advisory_lock returns void; its text form is the empty string, so
	// "::text = ''" turns the wait into a boolean that is true once granted.
	tryExcl := acquireSQL("pg_try_advisory_lock($1)", "pg_advisory_unlock", exclProbes, 2, fence)
	lockExcl := acquireSQL("pg_advisory_lock($1)::text = ''", "pg_advisory_unlock", exclProbes, 2, fence)
	return statements{
		tryExclusive:  statement{"dlock_try_exclusive", flatAcquireSQL("pg_try_advisory_lock($1)", "pg_advisory_unlock", exclProbes, 2, fence)},
		lockExclusive: statement{"dlock_lock_exclusive", flatAcquireSQL("pg_advisory_lock($1)::text = ''", "pg_advisory_unlock", exclProbes, 2, fence)},
		tryValue:      statement{"dlock_try_value", valueSQL(tryExcl, "$6", values)},
		lockValue:     statement{"dlock_lock_value", valueSQL(lockExcl, "$6", values)},
		tryAny:        statement{"dlock_try_any", anySQL(fence)},
		tryShared:     statement{"dlock_try_shared", flatAcquireSQL("pg_try_advisory_lock_shared($1)", "pg_advisory_unlock_shared", sharedProbes, 1, fence)},
		lockShared:    statement{"dlock_lock_shared", flatAcquireSQL("pg_advisory_lock_shared($1)::text = ''", "pg_advisory_unlock_shared", sharedProbes, 1, fence)},
		// Release ends every session-level advisory lock of the session:
		// the connection is the lease's alone, so those are exactly the
		// lease's locks. It then restores the session's own
		// idle_session_timeout ($2, "" to leave it). One column, ok:
		// false, with nothing done, when the marker differs. It is one CASE
		// rather than a subquery of the marker check, as flatAcquireSQL is
		// (a subquery level is an executor node per execution); of the
		// unlock and the restore, both run, in either order.
		release: statement{"dlock_release", `SELECT CASE
    WHEN current_setting('dlock.session', true) IS DISTINCT FROM $1::text THEN false
    WHEN $2::text = '' THEN pg_advisory_unlock_all()::text = ''
    ELSE length(pg_advisory_unlock_all()::text || set_config('idle_session_timeout', $2::text, false)) >= 0
  END AS ok`},
		// The heartbeat confirms that the session is the driver's, that it
		// still holds the advisory key $2 (high and low 32 bits compared as
		// pg_locks shows them), and restarts the server's idle timer with
		// the new TTL ($3, "" to leave it).
		heartbeat: statement{"dlock_heartbeat", `SELECT c.ok, pg_backend_pid() AS pid,
  CASE WHEN c.ok THEN EXISTS (SELECT 1 FROM pg_catalog.pg_locks
    WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND objsubid = 1 AND granted
      AND classid::int8 = ($2::int8 >> 32) & 4294967295 AND objid::int8 = $2::int8 & 4294967295) END AS held,
  CASE WHEN c.ok AND $3::text <> '' THEN set_config('idle_session_timeout', $3::text, false) END AS idle
FROM (SELECT current_setting('dlock.session', true) IS NOT DISTINCT FROM $1::text AS ok OFFSET 0) c`},
	}
}

// Names of the driver's database objects (see "Migration").
const (
	fenceName = "dlock_fence"
	groupName = "dlock_owner_groups"
	valueName = "dlock_values"
)
