package postgres

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// session is one PostgreSQL connection that the driver owns outright: it made
// it, or took it out of the caller's pool for good. It holds the locks of at
// most one lease at a time, so that the end of the connection ends exactly
// that lease, and no two leases ever stack on one session.
//
// A session is used by one goroutine at a time (pgconn is not safe for
// concurrent use). The exceptions are abort and the cancel request, which
// only touch the network connection and immutable fields.
type session struct {
	pg     *pgconn.PgConn
	pid    uint32 // pg_backend_pid() when the driver set the session up
	marker string // the session's dlock.session setting
	// idle is the session's own idle_session_timeout, restored on release;
	// "" on servers without it (before PostgreSQL 14).
	idle string
	// prepared holds the description of each statement prepared on the
	// session, by name: executions then skip the Describe message, and the
	// server does not send the row description every time.
	prepared map[string]*pgconn.StatementDescription

	// applied is the idle_session_timeout the session has now, as far as
	// the driver knows: its own value (idle) after setup and after a
	// restore, a lease's TTL from its grant on; "" when unknown (a
	// statement that could have set it failed). A grant whose TTL the
	// session has already leaves it alone, and a release leaves a lease's
	// TTL in place when it is long enough for the idle list to restore the
	// session's own value later (see sessions.put): a critical section
	// then changes no setting at all, where each change costs the server
	// the setting's bookkeeping and a pass over all settings at commit.
	applied string
	// restore, while the session is idle with a lease's TTL as its
	// timeout, restores its own value before the server would end it;
	// restoreGen tells its call from one of an earlier idle period that
	// Stop came too late for. Both are guarded by the idle list's lock.
	restore    *time.Timer
	restoreGen uint64

	// viaPooler: the process ID in the connection's BackendKeyData is not
	// the backend's, so something (a pooler, a proxy) sits in between.
	viaPooler bool

	reused    bool      // it was taken from the idle list, not newly made
	idleSince time.Time // when it was last given back
	broken    atomic.Bool
}

// newMarker returns a random value for the dlock.session setting.
func newMarker() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "dlock-" + strconv.FormatUint(binary.BigEndian.Uint64(b[:8]), 36) + strconv.FormatUint(binary.BigEndian.Uint64(b[8:]), 36)
}

// setupSession checks that pg is a fresh server session of its own, marks it
// as the driver's, and makes the driver's locks independent of the session
// defaults a caller or an administrator may have set:
//
//   - lock_timeout and statement_timeout 0, so that a wait in PostgreSQL's
//     queue ends only when the driver cancels it;
//   - idle_in_transaction_session_timeout 0 (the driver never idles in a
//     transaction, but the owner statements use one);
//   - synchronous_commit on where it was off, so that the fencing sequence
//     survives a crash (see "Guarantees");
//   - plan_cache_mode force_generic_plan (PostgreSQL 12 and later): the
//     driver's statements have one plan whatever their parameters, and
//     PostgreSQL would otherwise plan each of them anew for its first five
//     executions on every session, which a burst of new sessions (clients
//     starting together) pays on the path from one holder to the next.
//
// It costs two round trips, once per connection; a changed backend process
// between them, a marker already set (the session was used by another dlock
// client) or advisory locks already held all mean that the connection does
// not lead to a session of its own, and it is refused with ErrSessionChanged.
func setupSession(ctx context.Context, pg *pgconn.PgConn) (*session, error) {
	s := &session{pg: pg, marker: newMarker(), prepared: map[string]*pgconn.StatementDescription{}}
	row, err := s.simple(ctx, `SELECT pg_backend_pid()::text, coalesce(current_setting('dlock.session', true), ''),
  (SELECT count(*) FROM pg_catalog.pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid())::text,
  coalesce(current_setting('idle_session_timeout', true), ''), current_setting('server_version_num')`)
	if err != nil {
		return nil, err
	}
	if len(row) != 5 {
		return nil, fmt.Errorf("postgres: session setup returned %d columns, want 5", len(row))
	}
	pid1, prev, locks, idle, version := row[0], row[1], row[2], row[3], row[4]
	if prev != "" {
		return nil, sessionChanged("a new connection reached a server session that another of dlock's connections set up (backend %s)", pid1)
	}
	if locks != "0" {
		return nil, sessionChanged("a new connection reached a session that already holds %s advisory locks (backend %s)", locks, pid1)
	}
	if v, err := strconv.Atoi(version); err == nil && v >= 140000 {
		// Milliseconds, so that restoring it is exact.
		if ms, err := idleMillis(idle); err == nil {
			s.idle = ms
		}
	}
	s.applied = s.idle
	row, err = s.simple(ctx, `SELECT pg_backend_pid()::text, set_config('dlock.session', '`+s.marker+`', false),
  set_config('lock_timeout', '0', false), set_config('statement_timeout', '0', false),
  set_config('idle_in_transaction_session_timeout', '0', false),
  CASE WHEN current_setting('synchronous_commit') = 'off' THEN set_config('synchronous_commit', 'on', false) END,
  CASE WHEN current_setting('server_version_num')::int >= 120000 THEN set_config('plan_cache_mode', 'force_generic_plan', false) END`)
	if err != nil {
		return nil, err
	}
	if len(row) == 0 || row[0] != pid1 {
		got := "none"
		if len(row) > 0 {
			got = row[0]
		}
		return nil, sessionChanged("the backend process changed between two statements of a new connection (%s, then %s)", pid1, got)
	}
	pid, err := strconv.ParseUint(pid1, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("postgres: pg_backend_pid() returned %q", pid1)
	}
	s.pid = uint32(pid)
	s.viaPooler = pg.PID() != s.pid
	return s, nil
}

// idleMillis turns a shown idle_session_timeout ("0", "1500ms", "10min",
// "1h", "1d" as SHOW prints it) into whole milliseconds.
func idleMillis(shown string) (string, error) {
	units := []struct {
		suffix string
		ms     int64
	}{{"ms", 1}, {"min", 60_000}, {"s", 1000}, {"h", 3_600_000}, {"d", 86_400_000}}
	for _, u := range units {
		if n, ok := cutSuffix(shown, u.suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				return "", err
			}
			return strconv.FormatInt(v*u.ms, 10), nil
		}
	}
	if _, err := strconv.ParseInt(shown, 10, 64); err != nil {
		return "", err
	}
	return shown, nil
}

func cutSuffix(s, suffix string) (string, bool) {
	if len(s) > len(suffix) && s[len(s)-len(suffix):] == suffix {
		return s[:len(s)-len(suffix)], true
	}
	return "", false
}

// simple runs sql (one statement, no parameters) with the simple protocol and
// returns its first row as text, for the rare statements that do not pay
// for preparing.
func (s *session) simple(ctx context.Context, sql string) ([]string, error) {
	results, err := s.pg.Exec(ctx, sql).ReadAll()
	if err != nil {
		return nil, err
	}
	var row []string
	for _, r := range results {
		if r.Err != nil {
			return nil, r.Err
		}
		if len(r.Rows) > 0 {
			row = row[:0]
			for _, v := range r.Rows[0] {
				row = append(row, string(v))
			}
		}
	}
	return row, nil
}

// query runs the prepared statement st with params (each in binary format:
// int8 as 8 big-endian bytes, text as its bytes) and returns its first row in
// binary format, copied. It prepares st on the session first if needed. It
// takes no context: pgx would close the connection when one ends, so calls
// are ended early by interruptible or by breaking the connection instead.
func (s *session) query(st statement, oids []uint32, params ...[]byte) ([][]byte, error) {
	ctx := context.Background()
	sd := s.prepared[st.name]
	if sd == nil {
		var err error
		if sd, err = s.pg.Prepare(ctx, st.name, st.sql, oids); err != nil {
			return nil, err
		}
		s.prepared[st.name] = sd
	}
	// The statement description lets pgx skip the Describe message: the
	// server then sends no row description with every execution, which it
	// would otherwise build and the client decode each time.
	rr := s.pg.ExecStatement(ctx, sd, params, binaryFormat, binaryFormat)
	var row [][]byte
	for rr.NextRow() {
		if row == nil {
			for _, v := range rr.Values() {
				if v == nil {
					row = append(row, nil)
				} else {
					row = append(row, append([]byte{}, v...))
				}
			}
		}
	}
	if _, err := rr.Close(); err != nil {
		if isCode(err, "26000") {
			// "prepared statement does not exist": the statement was
			// prepared on another server session.
			return nil, sessionChanged("a statement prepared on this connection is missing from its server session")
		}
		return nil, err
	}
	if row == nil {
		return nil, errors.New("postgres: a statement returned no row")
	}
	return row, nil
}

// binaryFormat is the format code list that makes every parameter and every
// result column binary (one code applies to all).
var binaryFormat = []int16{1}

// abort breaks the connection at once, from any goroutine: the socket is
// closed (which ends the server session, and every lock on it, as soon as
// the server reads the end of the stream), and a statement in flight fails.
// The deadline first makes a write in flight fail at once instead of
// blocking in Close (TLS sends a closing alert).
func (s *session) abort() {
	s.broken.Store(true)
	conn := s.pg.Conn()
	_ = conn.SetDeadline(time.Now())
	_ = conn.Close()
}

// close closes the connection, politely when it is idle and healthy. It must
// not run while another goroutine uses the session.
func (s *session) close() {
	if s.broken.Load() || s.pg.IsClosed() {
		_ = s.pg.Conn().Close()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = s.pg.Close(ctx)
}

// healthy reports whether the session can be used for another statement.
func (s *session) healthy() bool {
	return !s.broken.Load() && !s.pg.IsClosed() && s.pg.TxStatus() == 'I'
}

// How a statement in flight ends when its caller's context does.
type policy uint8

const (
	// abortAtOnce breaks the connection: for heartbeats and releases, whose
	// late answer is of no use (the lock ends with the connection).
	abortAtOnce policy = iota
	// finishShort lets a statement that does not wait for a lock finish for
	// shortGrace, so that the connection survives, and breaks it after.
	finishShort
	// cancelWait asks the server to cancel the statement (a wait in the lock
	// queue), lets it end for cancelGrace, and breaks the connection after.
	cancelWait
)

// Grace periods of the policies. The conformance suite and the core expect a
// cancelled Lock to return within a second even on a loaded machine.
const (
	shortGrace  = 250 * time.Millisecond
	cancelGrace = 500 * time.Millisecond
)

// interruptible runs fn, which uses the session without a context, and ends
// it early by p once ctx ends. It reports whether ctx ended while fn ran, in
// which case fn's outcome is not wanted: the caller undoes it. When a cancel
// request was sent, interruptible waits for it to have reached the server, so
// that it cannot cancel the session's next statement.
func (s *session) interruptible(ctx context.Context, p policy, fn func() error) (bool, error) {
	if ctx.Done() == nil {
		return false, fn()
	}
	var (
		mu         sync.Mutex
		finished   bool
		timer      *time.Timer
		cancelling chan struct{}
	)
	breakLater := func(d time.Duration) {
		timer = time.AfterFunc(d, func() {
			mu.Lock()
			defer mu.Unlock()
			if !finished {
				s.abort()
			}
		})
	}
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if finished {
			return
		}
		switch p {
		case abortAtOnce:
			s.abort()
		case finishShort:
			breakLater(shortGrace)
		case cancelWait:
			done := make(chan struct{})
			cancelling = done
			go func() {
				defer close(done)
				cctx, cancel := context.WithTimeout(context.Background(), cancelGrace)
				defer cancel()
				_ = s.pg.CancelRequest(cctx)
			}()
			breakLater(cancelGrace)
		}
	})
	err := fn()
	fired := !stop()
	mu.Lock()
	finished = true
	if timer != nil {
		timer.Stop()
	}
	wait := cancelling
	mu.Unlock()
	if wait != nil {
		<-wait
	}
	return fired, err
}

// isCode reports whether err is a server error with SQLSTATE code.
func isCode(err error, code string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == code
}

// isServerError reports whether err is an error the server reported about a
// statement, on a session that goes on (not FATAL or PANIC).
func isServerError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Severity != "FATAL" && pgErr.Severity != "PANIC"
}

// sessionEnded reports whether err says that the server ended the session
// (FATAL: pg_terminate_backend, idle_session_timeout, shutdown), so that its
// locks are gone.
func sessionEnded(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Severity == "FATAL" || pgErr.Severity == "PANIC")
}

// stopRestore stops the restoring of s's own idle_session_timeout, if it
// is pending. Callers hold the idle list's lock.
func (s *session) stopRestore() {
	s.restoreGen++
	if s.restore != nil {
		s.restore.Stop()
		s.restore = nil
	}
}

// lazyRestoreMin is the shortest idle_session_timeout that a released
// session keeps while idle (restored after half of it, see sessions.put):
// below it, the release statement restores the session's own value itself,
// so that a session is never restored in a hurry, nor ended by the server
// while idle, on a loaded machine.
const lazyRestoreMin = 2 * time.Second

// lazyRestore reports whether s may be released without restoring its own
// idle_session_timeout: it has a lease's TTL of at least lazyRestoreMin.
func (s *session) lazyRestore() bool {
	ms, err := strconv.ParseInt(s.applied, 10, 64)
	return err == nil && ms > 0 && time.Duration(ms)*time.Millisecond >= lazyRestoreMin
}

// restoreDelay is how long s may stay idle before its own
// idle_session_timeout is restored: half of the TTL it has (the server ends
// it after all of it), and at once when that is unknown.
func (s *session) restoreDelay() time.Duration {
	ms, err := strconv.ParseInt(s.applied, 10, 64)
	if err != nil || ms <= 0 {
		return 0
	}
	return time.Duration(ms) * time.Millisecond / 2
}
