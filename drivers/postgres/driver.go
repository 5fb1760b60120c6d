package postgres

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dlock-go/dlock/driver"
)

// Driver is a dlock driver over one PostgreSQL database, with session-level
// advisory locks; [Driver.Capabilities] lists what it can do. Make it with
// [New] over a pgxpool.Pool, with [NewFromConfig], or through
// dlock.Open with a "postgres://" or "postgresql://" URL. It is safe for
// concurrent use.
type Driver struct {
	o        options
	sessions *sessions
	stmts    statements

	// groupTable, valueTable and fenceLiteral name the driver's objects in
	// SQL: the quoted tables, and the quoted sequence as a string literal.
	groupTable   string
	valueTable   string
	fenceLiteral string

	setupMu       sync.Mutex
	migrated      bool
	poolerChecked bool

	// racedGrants counts grants given back because the caller's context
	// ended while the statement ran, for tests and diagnostics.
	racedGrants atomic.Int64

	closed atomic.Bool
	mu     sync.Mutex
	leases map[*lease]struct{}
}

var _ driver.Driver = (*Driver)(nil)

// PoolConn is what a pool hands out: *pgxpool.Conn satisfies it.
type PoolConn interface {
	// Hijack takes the connection out of the pool for good.
	Hijack() *pgx.Conn
}

// Pool is a pool of connections: *pgxpool.Pool satisfies it (with C
// *pgxpool.Conn, which Go infers: New(pool) needs no type argument).
type Pool[C PoolConn] interface {
	Acquire(ctx context.Context) (C, error)
}

// New returns a Driver that takes the connections it needs from
// pool, which the caller keeps owning: Close does not close it.
//
// Advisory locks belong to a session, so the driver never gives a connection
// that held a lock back to the pool, where another user could inherit,
// unlock or lose the lock with it: it acquires a connection and hijacks it
// (takes it out of the pool for good), keeps it for its own later locks
// while idle (see [WithMaxIdleTime]), and closes it itself. The pool makes
// new connections to replace those; they count against the server's
// max_connections but not the pool's MaxConns, and the Driver's own bound is
// [WithMaxConns].
//
// The pool's connections must reach PostgreSQL directly or through a
// session-mode pooler; see [ErrSessionChanged].
func New[C PoolConn](pool Pool[C], opts ...Option) (*Driver, error) {
	if pool == nil {
		return nil, errors.New("postgres: New with a nil pool")
	}
	connect := func(ctx context.Context) (*pgconn.PgConn, error) {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		conn := c.Hijack()
		if conn == nil {
			return nil, errors.New("postgres: the pool's connection hijacked to nil")
		}
		return conn.PgConn(), nil
	}
	return newDriver(connect, opts)
}

// NewFromConfig returns a Driver that makes its own connections with config
// (as parsed by pgconn.ParseConfig or pgx.ParseConfig) and closes them on
// Close. Its connections are made on demand; the first acquisition reports a
// wrong address or password. dlock.Open, by contrast, connects at once.
func NewFromConfig(config *pgconn.Config, opts ...Option) (*Driver, error) {
	if config == nil {
		return nil, errors.New("postgres: NewFromConfig with a nil config")
	}
	cfg := config.Copy()
	return newDriver(func(ctx context.Context) (*pgconn.PgConn, error) {
		return pgconn.ConnectConfig(ctx, cfg)
	}, opts)
}

func newDriver(connect connector, opts []Option) (*Driver, error) {
	o, err := defaultOptions().with(opts)
	if err != nil {
		return nil, err
	}
	d := &Driver{
		o:            o,
		stmts:        newStatements(o),
		groupTable:   o.qualified(groupName),
		valueTable:   o.qualified(valueName),
		fenceLiteral: "'" + strings.ReplaceAll(o.qualified(fenceName), "'", "''") + "'",
		leases:       map[*lease]struct{}{},
	}
	d.sessions = newSessions(connect, d.setupSession, func(ctx context.Context, s *session) error {
		return releaseSession(ctx, d, s, finishShort, false)
	}, o)
	return d, nil
}

// setupSession runs, once per new connection, the driver's migration until
// one has succeeded, and the pooler check until one has passed.
func (d *Driver) setupSession(ctx context.Context, s *session) error {
	d.setupMu.Lock()
	defer d.setupMu.Unlock()
	if !d.migrated {
		if err := migrate(ctx, s, d.o); err != nil {
			return err
		}
		d.migrated = true
	}
	if !d.poolerChecked && s.viaPooler {
		if err := d.checkPooler(ctx, s); err != nil {
			return err
		}
	}
	d.poolerChecked = true
	return nil
}

// checkPooler runs when the first connection turns out to go through a
// pooler or proxy (its BackendKeyData names another process than the
// backend): a session-mode pooler gives a second client connection a server
// session of its own, a transaction-mode one lends it s's server session,
// which s just released at the end of its statement. A second connection
// that finds s's mark is refused, so that even a Driver that would only ever
// use one connection learns that it cannot rely on its session.
func (d *Driver) checkPooler(ctx context.Context, s *session) error {
	pg, err := d.sessions.connect(ctx)
	if err != nil {
		return err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = pg.Close(closeCtx)
		cancel()
	}()
	probe := &session{pg: pg}
	row, err := probe.simple(ctx, "SELECT coalesce(current_setting('dlock.session', true), '')")
	if err != nil {
		return err
	}
	if len(row) == 1 && row[0] == s.marker {
		return sessionChanged("a second connection through the pooler reached the first connection's server session (backend %d)", s.pid)
	}
	return nil
}

// Capabilities reports read-write and reentrant locks, waiting in
// PostgreSQL's lock queue (Blocking), the first free lock among several in
// one statement (AnyAcquirer: see AcquireAny), and inspection with the value
// and token of a hold taken with a value (Values: see Inspect). It accepts every TTL
// the core accepts (10 ms to 30 days), and every key, as keys are hashed,
// except malformed explicit advisory keys (CheckKey; see [AdvisoryKey]).
func (d *Driver) Capabilities() driver.Capabilities {
	return driver.Capabilities{
		Shared:      true,
		Reentrant:   true,
		Blocking:    true,
		CheckKey:    validateKey,
		AnyAcquirer: d,
		Inspector:   d,
		Values:      true,
	}
}

// Close closes the Driver's connections: idle ones at once, and those of
// held locks and waiting acquisitions by breaking them, which ends their
// locks with their sessions (a lease's loss is then reported with
// driver.ErrClosed). A pool passed to [New] stays open. Later calls
// return driver.ErrClosed; a second Close returns nil.
func (d *Driver) Close() error {
	if !d.closed.CompareAndSwap(false, true) {
		return nil
	}
	d.mu.Lock()
	held := slices.Collect(maps.Keys(d.leases))
	d.mu.Unlock()
	for _, l := range held {
		l.lose(driver.ErrClosed)
	}
	d.sessions.close()
	return nil
}

func (d *Driver) enter(ctx context.Context) error {
	if d.closed.Load() {
		return driver.ErrClosed
	}
	return ctx.Err()
}

// opErr is what an operation returns for err: ctx's error when ctx ended,
// ErrClosed after Close, and err otherwise, for the core to wrap once.
func (d *Driver) opErr(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		// A network deadline taken from ctx may fire a moment before
		// ctx's own timer: report the deadline, not the I/O timeout.
		<-ctx.Done()
		return ctx.Err()
	}
	if d.closed.Load() {
		return driver.ErrClosed
	}
	return err
}

func (d *Driver) track(l *lease) {
	d.mu.Lock()
	d.leases[l] = struct{}{}
	d.mu.Unlock()
}

func (d *Driver) forget(l *lease) {
	d.mu.Lock()
	delete(d.leases, l)
	d.mu.Unlock()
}
