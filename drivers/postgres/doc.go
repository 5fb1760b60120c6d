// Package postgres is dlock's driver for PostgreSQL (10 or later; 14 or
// later for server-side expiry; tested with 15), over session-level advisory
// locks.
//
// Importing it registers the URL schemes "postgres" and "postgresql" with
// dlock.Open:
//
//	import _ "github.com/dlock-go/dlock/drivers/postgres"
//
//	client, err := dlock.Open(ctx, "postgres://app:secret@db.internal:5432/app")
//
// An application that already has a pgxpool.Pool passes it to [New]
// instead, and keeps owning it (a pgconn.Config goes to [NewFromConfig]):
//
//	pool, err := pgxpool.New(ctx, dsn)
//	...
//	d, err := postgres.New(pool)
//	...
//	client, err := dlock.New(d)
//
// # Connections
//
// An advisory lock belongs to the server session that took it, and ends with
// it. Over an ordinary connection pool this breaks silently: lock and unlock
// land on different connections, a lock stays on a pooled connection that
// the next borrower inherits (and may unlock, or stack on), and it vanishes
// when the pool recycles the connection. The driver therefore gives every
// held lock a connection of its own, which nothing else uses while the lock
// is held:
//
//   - an acquisition takes an idle connection of the Driver's, or makes one
//     (dials it, or takes one out of the caller's pool for good: pool.Acquire
//     then Hijack), runs one statement on it, and on success keeps the
//     connection for the lease;
//   - Release unlocks on that connection and puts it back on the Driver's
//     idle list, for the next acquisition;
//   - a Lock waiting in PostgreSQL's queue holds its connection while it
//     waits (dlock's core lets one goroutine per Client and key wait on the
//     backend; the others wait in the process).
//
// So a Driver has one connection (one server backend) per held lock and per
// waiting Lock, plus idle ones (closed after [WithMaxIdleTime]), at most
// [WithMaxConns] in all: a Lock beyond that waits for a connection, a
// TryLock fails with an error wrapping [ErrConnLimit]. Size the server's
// max_connections for it. One connection per lock, rather than many locks on
// one, is what lets each lock end on its own: the server ends an unrenewed
// lock by ending its session (see "Guarantees"), and a connection that dies
// loses exactly one lock. The price is a backend process per held lock, and
// a goroutine per lock held longer than a renewal period (see
// "Capabilities"): this suits locks held by the dozen or the hundred, not by
// the ten thousand.
//
// Every connection is checked when the driver takes it (two round trips,
// once per connection): its session must be fresh (no advisory locks, not
// set up by another of dlock's connections) and stay the same backend
// process. The driver marks the session with a random value of the custom
// setting dlock.session, and every statement it runs later checks the mark
// and the backend's pid before it locks or unlocks anything. A
// transaction-mode pooler (PgBouncer with pool_mode=transaction, and proxies
// like it) lends server sessions per transaction, which breaks session-level
// locks; the driver notices a changed backend, a foreign mark or a prepared
// statement gone missing, refuses the connection, and returns an error
// wrapping [ErrSessionChanged]. When the first connection shows that a
// pooler sits in between (the backend process it names in its cancel key is
// not the backend's own), the driver opens a second one at once to see
// whether it lands on the first one's session. A direct connection works, and
// so does a session-mode pooler that resets sessions between clients
// (PgBouncer's default server_reset_query, DISCARD ALL). The driver also sets
// lock_timeout, statement_timeout and idle_in_transaction_session_timeout to
// 0 on its sessions, so that no session default cuts a wait short, and
// synchronous_commit to on where it was off (see "Guarantees"), and
// plan_cache_mode to force_generic_plan (PostgreSQL 12 and later: its
// statements' plans do not depend on their parameters, and a new session
// would otherwise plan each statement anew for its first five runs).
//
// # Capabilities
//
// Capabilities: Shared, Reentrant, Blocking, CheckKey (explicit advisory
// keys, see "Keys"), AnyAcquirer (a semaphore's permits tried in one
// statement, below), Inspector (from pg_locks) and Values (the value of a
// plain exclusive hold, with its token, below). In detail: exclusive locks
// (pg_advisory_lock), read-write locks (Shared: pg_advisory_lock_shared, so
// readers share a lock and a writer excludes them), reentrant locks
// (Reentrant, below), fencing tokens, server-side waiting (Blocking) and
// loss reports (Lease.OnLoss).
//
// A try (Acquire without Request.Block) is one statement, one round trip:
// pg_try_advisory_lock (or its shared form) and, only when it succeeds, the
// fencing token, the server-side expiry and a check for reentrant groups, in
// the same statement. A blocking Acquire is the same statement with
// pg_advisory_lock, which waits in PostgreSQL's own lock queue, so a release
// hands the lock to the next waiter in one server-side step, in order. When
// the caller's context ends during the wait, the driver sends PostgreSQL a
// cancel request (and keeps the connection, where pgx by default would close
// it), waits for the statement to end, and then unlocks whatever the session
// holds: a grant that raced with the cancellation is given back before
// Acquire returns, never leaked. Should the server not answer within half a
// second, the connection is closed instead, which ends the session and its
// locks.
//
// A semaphore's try for any free permit (driver.AnyAcquirer) is one
// statement too: on one connection it tries the permits' keys in turn, each
// as a try tries its one key, and stops at the first grant, which draws the
// fencing token and sets the expiry as a try does. So it takes at most one
// lock, and the lease is an ordinary one of that permit's key: clients that
// try permits one at a time and clients that ask for any exclude each other,
// each permit being a plain advisory lock either way. The statement is a
// recursive query that tries one key per iteration, and stops iterating
// after a grant; it needs nothing installed in the database. Its failure or
// cancellation is undone as a try's is: the session's locks are unlocked, or
// its connection closed.
//
// Release runs pg_advisory_unlock_all on the lease's session, which holds
// nothing but the lease's locks. Extend is a heartbeat on the same
// connection: it checks that the session is still the driver's and still
// holds the lock (in pg_locks), and restarts the server-side expiry. A
// heartbeat whose caller gives up goes on in the background and still counts;
// one still unanswered when the lease's validity runs out is cut off by
// closing the connection. From the first heartbeat on, a goroutine per held
// lock reads the idle connection between calls, so that the end of the
// session (pg_terminate_backend, the server's idle timeout, a shutdown, a
// broken connection) is reported through the lease's OnLoss at once, not at
// the next heartbeat. (Before it, the lock is watched by nothing but the
// heartbeat: a lock held for less than a renewal period, as most are, costs
// no goroutine and no read.)
//
// Reentrant locks (dlock.WithOwner) work across connections and processes,
// as dlock promises: every hold by one owner of one key in one mode belongs
// to the owner's group, whose members each keep a session of their own (so
// each ends on its own, and the lock lasts while any member holds it) and
// share the group's fencing token. Members hold, shared, a key derived from
// the owner and a key shared by all groups of that mode; the first member
// checks, in its statement, that no plain holder and no conflicting group is
// there, later members only that a member of their group is; plain locks
// probe for groups in their own statement and give the lock back when one is
// there. Each side takes its own keys before it probes the other's, so of
// two racing statements at least one sees the other. PostgreSQL's stacking of
// advisory locks within one session is never used: the driver never puts two
// holds on one session, so no hold stacks on another owner's. Owner requests
// never wait in PostgreSQL's queue, where a waiting writer would stall a
// re-entry (the owner would wait for itself): they are answered at once, and
// a blocking Lock with an owner, like a plain Lock that finds an owner group
// in the way, polls with jittered backoff from 2 ms to 250 ms. Owner
// requests cost a short PL/pgSQL block each.
//
// Values (a leader election's candidate, driver.Request.Value): an advisory
// lock carries no data, so a plain exclusive acquisition with a value runs
// a statement of its own, which, when it is granted the lock, also takes
// (shared, on the same session) a tag key of the two-int4 form made from
// its fencing token, and writes the row (key, token, value, backend pid)
// of the table dlock_values, all in the one statement, so that the row is
// visible only once the grant and its token are settled. Inspect reports
// the row's value and token only when, in one snapshot of pg_locks, the
// row's backend holds both the lock and the tag of the row's token: a row
// outlives its hold (nothing deletes it; the next hold with a value
// replaces it), but the tag ends with the hold however it ends (release,
// a cancelled wait given back, the session's end), and no other grant ever
// takes that tag, so the row of an ended hold is never reported, not even
// while the same session holds the lock again. Between a grant and its
// commit, and for holds without a value, Inspect reports the lock held
// with no value and no token. The core sends values only with plain
// exclusive requests (elections are neither shared nor reentrant); shared
// and owner requests leave theirs aside. Such an acquisition is a write
// (of an unlogged table), where a plain one only advances the sequence.
//
// # Guarantees
//
// PostgreSQL on one primary is strongly consistent: two sessions never hold
// conflicting advisory locks at once, as judged by the server. What a holder
// may trust is bounded by its lease:
//
//   - The server ends a lock's session when the lease goes unrenewed for its
//     TTL: the driver sets the session's idle_session_timeout to the TTL
//     (rounded up to a millisecond) with every grant and heartbeat, unless
//     the session has that value already. The server restarts the timer
//     when each statement ends, so it never ends a session before the
//     holder's validity deadline, and a holder that froze or was cut off
//     loses its lock within the TTL. A released session gets its own value
//     back: at once for TTLs under 2 s, else once it has been idle for half
//     the TTL (a session used again before keeps the TTL, so that a lock
//     taken and released over and over changes no setting, which would
//     cost the server work at every commit). Before PostgreSQL 14, and for TTLs beyond the
//     setting's 24.8 days, the driver ends the session itself when the TTL
//     passes unrenewed; a holder that is frozen or cut off from the server
//     then keeps its lock until the server notices the dead connection (TCP
//     keep-alive, which the driver turns on for connections it dials).
//   - A lost lock is reported at once when the connection ends after the
//     first heartbeat (the idle connection is read from then on), at the
//     next heartbeat (every TTL/3) when the session ended before it or
//     survives without the lock, and in any case by the core at the validity
//     deadline: the start of the last confirmed grant or heartbeat, plus the
//     TTL, minus the core's safety margin.
//   - The validity of a grant from a blocking Acquire is the TTL plus the
//     time the statement waited in the queue, as the server measured it from
//     the statement's arrival to the grant (capped by the time the call took):
//     the server's expiry starts after the grant, so this is still no more
//     than the server promises, and a lock that was waited for longer than
//     its TTL is not thrown away on arrival.
//
// Fencing tokens come from one sequence, dlock_fence, advanced (nextval) in
// the acquisition statement, after the grant, on the holder's session. They
// therefore strictly increase per grant of a key (and across keys), across
// releases, expiries and server restarts, and across crashes: the statement
// commits before its result is sent, and the driver sets synchronous_commit
// to on for its sessions where it was off, so a token handed out is never
// handed out again by the same database. A re-entry by the same owner gets
// its group's token; every new group and every plain grant gets a new one.
// After a failover to an asynchronous replica the sequence may be behind the
// old primary's, and tokens may repeat: check tokens at the resource, and use
// synchronous replication where that window matters. The sequence costs one
// nextval per grant (a WAL record, and a flush at commit, every 32).
//
// # Keys
//
// A dlock key K (1 to 1024 arbitrary bytes) is locked as the advisory key
// [KeyID](K): the first 8 bytes of SHA-256(K), read as a big-endian signed
// bigint, the argument of pg_advisory_lock(bigint). Hashing maps any key to a
// valid advisory key, but two keys may collide: among n distinct keys in use,
// the probability that any two share an advisory key is about n²/2⁶⁵ (one in
// 3.7 × 10⁷ for a million keys). Colliding keys exclude each other; that
// costs waiting, never a second holder. A key made by [AdvisoryKey](id)
// locks the advisory key id itself, with no hashing, to interoperate with
// code that calls pg_advisory_lock(id) directly; other keys starting with its
// prefix ("\x00pg-advisory-key:") are refused with dlock.ErrInvalidKey.
//
// Advisory keys belong to the database, not to dlock: dlock's keys share one
// space of 2⁶⁴ bigint keys with every other application that takes bigint
// advisory locks in the same database, and exclude them. Advisory locks
// taken with two int4 keys, pg_advisory_lock(int, int), are a separate
// space, which dlock uses only for the tags of holds with a value (see
// "Capabilities"): the first int4 is 0x646c6b74 ("dlkt") XOR the high 32
// bits of the token, the second its low 32 bits; an application that takes
// one of those exclusively makes the acquisition with that token fail (and
// give the lock back). Besides K's own advisory key, the driver uses keys derived from K
// (SHA-256 over a role name, K and, for owner groups, the owner): owner
// groups hold some while they hold the lock, and acquisition statements take
// two of them for the length of the statement, to find owner groups. They
// share the space too, with the same collision bound; an application's lock
// on one of them would make dlock believe an owner group holds K.
//
// # Migration
//
// The driver uses three objects, created on first use (CREATE ... IF NOT
// EXISTS, in one transaction under an advisory lock) in the schema
// [WithSchema] names, "public" by default:
//
//	CREATE SEQUENCE IF NOT EXISTS public.dlock_fence AS bigint;
//	CREATE UNLOGGED TABLE IF NOT EXISTS public.dlock_owner_groups (
//		gkey  bigint PRIMARY KEY,
//		token bigint NOT NULL
//	);
//	CREATE UNLOGGED TABLE IF NOT EXISTS public.dlock_values (
//		gkey  bigint PRIMARY KEY,
//		token bigint NOT NULL,
//		value text NOT NULL,
//		pid   integer NOT NULL
//	);
//
// The sequence issues fencing tokens; dlock_owner_groups holds the token of
// each owner group while the group lives, and dlock_values the value of
// the latest hold with a value of each key (see "Capabilities"); both are
// unlogged: lost in a crash, as are the sessions they describe. A role that
// may not create them (PostgreSQL 15 revokes CREATE on schema public from
// ordinary roles) gets an error wrapping [ErrMigration]: run [Migration]
// once as a role that may, and grant the driver's role USAGE and UPDATE on
// the sequence, and SELECT, INSERT, UPDATE and DELETE on the tables.
//
// Databases migrated by earlier versions lack dlock_values. The driver
// creates it when its role may; when not, the driver works as before, and
// only acquisitions with a value (elections) fail, with an error wrapping
// [ErrMigration], until [Migration] (which creates only what is missing)
// has been run and the grants given; Inspect reports no values meanwhile.
//
// # URLs
//
//	postgres://[user[:password]@][host][:port][/database][?param=value&...]
//	postgresql://...
//
// The URL is parsed by pgx (pgconn.ParseConfig): its parameters (sslmode,
// application_name, target_session_attrs, ...) and the PG*
// environment variables apply, several hosts may be listed, and parameters
// pgx does not know are sent to the server as settings. Three parameters are
// the driver's own (four with connect_timeout, which
// bounds Open's connecting as on every backend, see dlock.DefaultConnectTimeout,
// and each later dial, as libpq's does; a Go duration or whole seconds):
// dlock_max_conns ([WithMaxConns]), dlock_max_idle_time
// ([WithMaxIdleTime], a Go duration) and dlock_schema ([WithSchema]). The
// driver dials its connections with TCP keep-alive (idle 10 s, then 3 probes
// 5 s apart), names them application_name=dlock unless the URL names them,
// connects once before Open returns (so that a wrong address, password or
// database fails there), and closes its connections on Close. Errors about
// the URL wrap dlock.ErrInvalidURL and never contain the password.
package postgres
