package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dlock-go/dlock/doctor"
	"github.com/dlock-go/dlock/internal/urlparams"
)

// The checks `dlock doctor` runs on a PostgreSQL deployment, by name.
const (
	checkPooler    = "postgres.pooler"
	checkIdle      = "postgres.idle-timeout"
	checkAdvisory  = "postgres.foreign-advisory-locks"
	doctorSetting  = "dlock.doctor"
	idleTimeoutMin = 14 // the first PostgreSQL major version with idle_session_timeout
)

func init() {
	doctor.Register(Scheme, diagnose)
	doctor.Register(SchemeAlt, diagnose)
}

// diagnose is the doctor of the PostgreSQL schemes. It connects with the
// driver's settings but not through the driver, which would refuse a
// transaction-mode pooler (the first hazard to report) and create its
// table and sequence (the doctor leaves nothing behind); it takes no lock.
func diagnose(ctx context.Context, req doctor.Request, r *doctor.Report) error {
	u, timeout, err := urlparams.SplitConnectTimeout(req.URL)
	if err != nil {
		return err
	}
	cfg, _, err := parseURL(u)
	if err != nil {
		return err
	}
	if timeout > 0 {
		cfg.ConnectTimeout = timeout
	}
	dial := func() (*pgconn.PgConn, error) {
		connectCtx, cancel := req.Connecting(ctx)
		defer cancel()
		pg, err := pgconn.ConnectConfig(connectCtx, cfg)
		if err != nil {
			return nil, fmt.Errorf("postgres: %s: %w", urlparams.Display(u), redact(u, err))
		}
		return pg, nil
	}
	first, err := dial()
	if err != nil {
		return err
	}
	defer closeConn(first)
	second, err := dial()
	if err != nil {
		return err
	}
	defer closeConn(second)

	if err := diagnosePooler(ctx, first, second, r); err != nil {
		return err
	}
	if err := diagnoseIdle(ctx, first, req.TTL, r); err != nil {
		return err
	}
	return diagnoseAdvisory(ctx, first, cfg.RuntimeParams["application_name"], r)
}

// closeConn closes pg, bounded: a Terminate to a frozen server would hang.
func closeConn(pg *pgconn.PgConn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = pg.Close(ctx)
}

// rows runs sql (one statement, its own transaction) with text
// parameters args and returns its rows as text.
func rows(ctx context.Context, pg *pgconn.PgConn, sql string, args ...string) ([][]string, error) {
	params := make([][]byte, len(args))
	for i, a := range args {
		params[i] = []byte(a)
	}
	res := pg.ExecParams(ctx, sql, params, nil, nil, nil).Read()
	if res.Err != nil {
		return nil, res.Err
	}
	out := make([][]string, len(res.Rows))
	for i, row := range res.Rows {
		out[i] = make([]string, len(row))
		for j, v := range row {
			out[i][j] = string(v)
		}
	}
	return out, nil
}

// diagnosePooler finds a pooler that lends server sessions per
// transaction: the first connection marks its session, and then the second
// connection finds the mark (the pooler gave it the first one's idle
// server session), or the first one's next statement lands on another
// backend or without its mark.
func diagnosePooler(ctx context.Context, first, second *pgconn.PgConn, r *doctor.Report) error {
	r.Ran(checkPooler)
	mark := "doctor-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	before, err := rows(ctx, first, "SELECT pg_backend_pid()::text, set_config('"+doctorSetting+"', '"+mark+"', false)")
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	other, err := rows(ctx, second, "SELECT pg_backend_pid()::text, coalesce(current_setting('"+doctorSetting+"', true), '')")
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	after, err := rows(ctx, first, "SELECT pg_backend_pid()::text, coalesce(current_setting('"+doctorSetting+"', true), '')")
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if first.PID() != 0 && strconv.FormatUint(uint64(first.PID()), 10) != before[0][0] {
		r.Fact("connection", "through a pooler or proxy (the connection's backend pid %d is not the session's %s)", first.PID(), before[0][0])
	}
	var seen string
	switch {
	case other[0][1] == mark:
		seen = "a second connection reached the first one's server session"
	case after[0][0] != before[0][0] || after[0][1] != mark:
		seen = "one connection's statements ran in different server sessions"
	default:
		return nil
	}
	r.Hazard(doctor.Finding{
		Check:  checkPooler,
		Hazard: "a transaction-mode pooler sits in between: " + seen,
		Why:    "advisory locks belong to a server session, which such a pooler lends to other clients after every transaction: locks would be held for, and released by, strangers (the driver refuses such connections with ErrSessionChanged)",
		Fix:    "connect dlock to PostgreSQL directly, or through a session-mode pool (PgBouncer pool_mode=session)",
	})
	return nil
}

// diagnoseIdle checks that the server ends a silent holder's session
// within the TTL. The driver sets each holding session's
// idle_session_timeout to the TTL, which frees the locks of a holder that
// froze or was cut off; before PostgreSQL 14 there is no such setting, and
// only TCP keep-alive ends a dead client's session.
func diagnoseIdle(ctx context.Context, pg *pgconn.PgConn, ttl time.Duration, r *doctor.Report) error {
	r.Ran(checkIdle)
	got, err := rows(ctx, pg, `SELECT current_setting('server_version_num'), current_setting('server_version'),
  current_setting('tcp_keepalives_idle'), current_setting('tcp_keepalives_interval'), current_setting('tcp_keepalives_count')`)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	v := got[0]
	r.Fact("version", "PostgreSQL %s", v[1])
	num, _ := strconv.Atoi(v[0])
	if problem := idleProblem(num, v[2], v[3], v[4], ttl); problem != "" {
		r.Hazard(doctor.Finding{
			Check:  checkIdle,
			Hazard: problem,
			Why:    "the server frees a frozen or cut-off holder's locks only when it ends its session: without idle_session_timeout that is when TCP keep-alive gives up on the connection, long after the TTL, and the lock stays held by nobody alive",
			Fix:    "upgrade to PostgreSQL 14 or later (the driver then sets each holding session's idle_session_timeout to the TTL), or lower tcp_keepalives_idle, tcp_keepalives_interval and tcp_keepalives_count so that idle + interval × count is below the TTL",
		})
	}
	return nil
}

// idleProblem says why a server of version num (server_version_num) with
// the given keep-alive settings (as SHOW prints them: seconds, "0" for the
// system's default) does not end a silent holder's session within ttl, or
// "" when it does. Linux's defaults are 7200 s, 75 s and 9 probes.
func idleProblem(num int, idle, interval, count string, ttl time.Duration) string {
	if num >= idleTimeoutMin*10000 {
		return ""
	}
	seconds := func(s string, dflt int) int {
		n, err := strconv.Atoi(strings.TrimSuffix(s, "s"))
		if err != nil || n <= 0 {
			return dflt
		}
		return n
	}
	dead := time.Duration(seconds(idle, 7200)+seconds(interval, 75)*seconds(count, 9)) * time.Second
	if dead <= ttl {
		return ""
	}
	return fmt.Sprintf("PostgreSQL %d.%d has no idle_session_timeout, and TCP keep-alive gives up on a dead client after %v, beyond the TTL of %v", num/10000, num/100%100, dead, ttl)
}

// diagnoseAdvisory finds advisory locks that other applications hold in
// the key space dlock's locks use: the one-bigint form of
// pg_advisory_lock (objsubid 1 in pg_locks), in this database. dlock's
// sessions are told apart by their application_name, app.
func diagnoseAdvisory(ctx context.Context, pg *pgconn.PgConn, app string, r *doctor.Report) error {
	r.Ran(checkAdvisory)
	got, err := rows(ctx, pg, `SELECT count(*)::text, count(DISTINCT l.pid)::text,
  coalesce(string_agg(DISTINCT coalesce(nullif(a.application_name, ''), '(none)'), ', '), '')
FROM pg_catalog.pg_locks l JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.objsubid = 1
  AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())
  AND a.application_name IS DISTINCT FROM $1`, app)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if got[0][0] == "0" {
		return nil
	}
	r.Hazard(doctor.Finding{
		Check:  checkAdvisory,
		Hazard: fmt.Sprintf("%s advisory lock(s) on single bigint keys are held by %s session(s) of other applications (application_name %s) in this database", got[0][0], got[0][1], got[0][2]),
		Why:    "they share dlock's key space: every dlock key maps to a bigint (SHA-256 of the name, or postgres.AdvisoryKey(id)), so a lock of theirs on the same id excludes a dlock lock and the reverse, and dlock inspect reports them as holders",
		Fix:    "give the other application's locks the two-int4 form pg_advisory_lock(int, int), a key space of its own, or dlock a database of its own; if the sharing is meant (postgres.AdvisoryKey), name dlock's connections with an application_name of their own so that this check tells them apart",
	})
	return nil
}
