package postgres

import (
	"errors"
	"fmt"
)

// ErrSessionChanged is wrapped by the errors the driver returns when the
// PostgreSQL session behind one of its connections is not the one it set up:
// the backend process changed between two statements, or the session carries
// another client's state. That is what a transaction-mode pooler (PgBouncer
// with pool_mode=transaction, and similar proxies) does, and session-level
// advisory locks cannot work through one: a lock taken in one statement would
// stay on a server connection that the pooler then lends to other clients.
// The driver refuses such connections instead of handing out locks that do
// not exclude. Connect directly, or through a session-mode pooler.
var ErrSessionChanged = errors.New("postgres: the server session changed under the driver; session-level advisory locks need a direct connection or a session-mode pooler (is this a transaction-mode pooler such as PgBouncer?)")

// ErrMigration is wrapped by the errors the driver returns when its
// database objects (see "Migration" in the package documentation) are
// missing and it could not create them, usually for lack of the CREATE
// privilege on the schema: by Open or the first acquisition on a new
// database, and by acquisitions with a value (elections) on a database
// migrated by an earlier version, which lacks the table dlock_values. Run
// [Migration] once as a role that has it.
var ErrMigration = errors.New("postgres: the dlock objects (sequence dlock_fence, tables dlock_owner_groups and dlock_values) are missing and could not be created; run postgres.Migration as a role allowed to create them")

// ErrConnLimit is wrapped by the error a try (an Acquire without
// Request.Block, as TryLock makes) returns when every connection the Driver
// may open ([WithMaxConns]) holds a lock or waits for one, so that none is
// left for the attempt. TryLock does not wait for a
// connection to come free; Lock does, for as long as its context allows.
var ErrConnLimit = errors.New("postgres: every connection the driver may open holds a lock or waits for one; raise WithMaxConns (and the server's max_connections), or hold fewer locks at once")

// sessionChanged returns an error wrapping ErrSessionChanged that says what
// was seen.
func sessionChanged(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrSessionChanged, fmt.Sprintf(format, args...))
}
