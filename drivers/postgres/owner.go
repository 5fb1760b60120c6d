package postgres

import (
	"strconv"
	"strings"

	"github.com/dlock-go/dlock/driver"
)

// Reentrant locks (requests with an Owner). PostgreSQL stacks advisory locks
// per session, but dlock's owners span sessions: the same owner may re-enter
// from another connection or another process. An owner's holds of a key in
// one mode therefore form a group, whose members each keep a session of
// their own, and so live and end independently:
//
//   - every member holds, shared, the group's key (the owner's) and the key
//     of all owner groups of that mode;
//   - the first member (who creates the group) checks, within its statement,
//     that nothing else holds the lock: no plain holder of the lock's own key
//     and no group of another kind or owner that conflicts; later members
//     only check that a member of their group is there, which (as every
//     member holds the all-groups key shared all along) proves that the group
//     has excluded every conflicting holder since it was created;
//   - plain locks, in their own statement, probe the all-groups keys after
//     taking the lock's own key, and give it back when a group is there.
//
// Each side takes its own keys before probing the other's, with probes that
// conflict with what the other side holds, so of two racing statements at
// least one sees the other. A gate key per owner (taken for the statement
// only) orders one owner's joins, so that two first members cannot both
// believe the other created the group. Members never wait in PostgreSQL's
// queue for a key another member needs, so a waiting plain Lock cannot stall
// a re-entry: owner requests are answered at once, and a blocking owner Lock
// polls.
//
// The group's fencing token is kept in the unlogged table dlock_owner_groups
// under the group's key while the group lives; the last member to leave
// deletes it.

// ownerAcquireSQL is the DO block that makes s a member of the group of
// req's owner, followed by a SELECT of its outcome: "held TOKEN PID",
// "locked PID" or "session PID".
func (d *Driver) ownerAcquireSQL(s *session, req driver.Request, k lockKeys, idle string) string {
	groups, others := k.ownerGroups, k.sharedOwner
	var create string
	if req.Mode == driver.Shared {
		groups = k.sharedOwner
		// A shared group needs no plain exclusive holder and no exclusive
		// group; plain readers and other shared groups may stay.
		create = "pg_try_advisory_xact_lock_shared(" + itoa(k.main) + ") AND pg_try_advisory_xact_lock(" + itoa(k.ownerGroups) + ")"
	} else {
		// An exclusive group needs nobody: no plain holder, no shared
		// group, and no other exclusive group (whose members hold the
		// all-groups key; this session's own hold does not conflict).
		create = "pg_try_advisory_xact_lock(" + itoa(k.main) + ") AND pg_try_advisory_xact_lock(" + itoa(others) + ") AND pg_try_advisory_xact_lock(" + itoa(groups) + ")"
	}
	setIdle := ""
	if idle != "" {
		setIdle = "PERFORM set_config('idle_session_timeout', '" + idle + "', false);"
	}
	r := strings.NewReplacer(
		"MARKER", s.marker,
		"GATE", itoa(k.gate),
		"GROUPS", itoa(groups),
		"GROUP", itoa(k.group),
		"CREATE", create,
		"TABLE", d.groupTable,
		"FENCE", d.fenceLiteral,
		"SETIDLE", setIdle,
	)
	return r.Replace(`DO $dlock$
DECLARE
	tok bigint;
BEGIN
	IF current_setting('dlock.session', true) IS DISTINCT FROM 'MARKER' THEN
		PERFORM set_config('dlock.outcome', 'session ' || pg_backend_pid(), false);
		RETURN;
	END IF;
	PERFORM pg_advisory_xact_lock(GATE);
	PERFORM pg_advisory_lock_shared(GROUPS);
	PERFORM pg_advisory_lock_shared(GROUP);
	IF NOT pg_try_advisory_xact_lock(GROUP) THEN
		-- another member is there: join its group
		SELECT token INTO tok FROM TABLE WHERE gkey = GROUP;
	END IF;
	IF tok IS NULL THEN
		IF NOT (CREATE) THEN
			PERFORM pg_advisory_unlock_shared(GROUP);
			PERFORM pg_advisory_unlock_shared(GROUPS);
			PERFORM set_config('dlock.outcome', 'locked ' || pg_backend_pid(), false);
			RETURN;
		END IF;
		tok := nextval(FENCE);
		INSERT INTO TABLE (gkey, token) VALUES (GROUP, tok)
			ON CONFLICT (gkey) DO UPDATE SET token = EXCLUDED.token;
	END IF;
	SETIDLE
	PERFORM set_config('dlock.outcome', 'held ' || tok || ' ' || pg_backend_pid(), false);
END
$dlock$;
SELECT current_setting('dlock.outcome')`)
}

// ownerReleaseSQL is the DO block that ends s's membership of its group,
// deleting the group's token when s was its last member, followed by a
// SELECT of "released" or "session".
func (d *Driver) ownerReleaseSQL(s *session, k lockKeys) string {
	restore := ""
	if s.idle != "" {
		restore = "PERFORM set_config('idle_session_timeout', '" + s.idle + "', false);"
	}
	r := strings.NewReplacer(
		"MARKER", s.marker,
		"GATE", itoa(k.gate),
		"GROUP", itoa(k.group),
		"TABLE", d.groupTable,
		"RESTORE", restore,
	)
	return r.Replace(`DO $dlock$
BEGIN
	IF current_setting('dlock.session', true) IS DISTINCT FROM 'MARKER' THEN
		PERFORM set_config('dlock.outcome', 'session', false);
		RETURN;
	END IF;
	PERFORM pg_advisory_xact_lock(GATE);
	PERFORM pg_advisory_unlock_all();
	IF pg_try_advisory_xact_lock(GROUP) THEN
		DELETE FROM TABLE WHERE gkey = GROUP;
	END IF;
	RESTORE
	PERFORM set_config('dlock.outcome', 'released', false);
END
$dlock$;
SELECT current_setting('dlock.outcome')`)
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
