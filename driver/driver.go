// Package driver defines the contract between dlock's core and its backends.
// This page is the whole of it: a driver author needs no other driver's code
// to write a correct one, and proves it with conformance.Run.
//
// Applications do not use this package: they use package dlock, whose Mutex,
// RWMutex and Lease are implemented once, by the core, over this contract.
//
// # The shape of a driver
//
// A driver implements three methods on its [Driver] and six on its [Lease].
// Everything else it can do it declares in one value, [Capabilities], which
// the core reads once, when a Client is made:
//   - facts about the backend (read locks, reentrancy, waiting in the
//     backend's own queue, blocks of fencing tokens, the TTLs and keys it
//     accepts, values stored with a hold), as plain fields;
//   - five optional behaviours, each an interface of its own because its
//     shape differs from a lock's ([Notifier], [BatchExtender],
//     [Transferer], [AnyAcquirer], [Inspector]), as fields that are nil
//     when the backend lacks them.
//
// The core never type-asserts a driver or a lease: what Capabilities says is
// all it uses. A wrapper (metrics, fault injection) therefore keeps every
// capability by returning its inner driver's value with the optional
// behaviours replaced by its own wrappers of them. A wrapper that wraps
// leases must at least wrap BatchExtender, Transferer and AnyAcquirer: the
// first two are handed its leases and must unwrap them for the inner
// driver, and the grants of all three must be wrapped as Acquire's are. One
// that embeds the
// inner Driver inherits its Capabilities method, so it declares its own
// whenever it wraps leases or means to hide a capability.
//
// # What the core does, so that a driver must not
//
// The core validates keys and TTLs (its own rules, then the driver's
// declared limits), generates the ID of every request, waits and retries
// with jittered backoff (or by notification), renews leases, computes
// validity deadlines on the monotonic clock, signals loss, counts reentrant
// handles, hands locks between goroutines of one Client, and wraps errors
// with the operation and key. A driver therefore:
//   - never retries an operation that may have been applied (the core
//     decides);
//   - never loops waiting for a lock unless it declares Blocking;
//   - never starts a renewal loop of its own (the core calls [Lease.Extend]);
//   - never stores a context beyond the call that received it.
//
// # Requirements
//
// Every driver must meet these; the conformance suite checks each.
//
//  1. Exclusion. Two Drivers made from two Open calls exclude each other
//     exactly as two processes would; a Driver is safe for concurrent use.
//  2. Nothing left behind. When an Acquire fails (ErrLocked, an error, or
//     ctx ending), nothing of it stays on the backend. When the request may
//     have been applied (a timeout, a lost reply), the driver releases it
//     by [Request.ID] before returning. When ctx has ended, the driver
//     returns ctx.Err(), not the error of the request it cut short.
//  3. Owner checks. Extend, Release and Transfer act only on the hold of
//     their own request ID: when it expired or belongs to someone else they
//     change nothing and return [ErrNotHeld]. Nobody else's lock is ever
//     touched.
//  4. Validity is a promise from the start of the call. [Lease.Validity]
//     is how long the backend promises the lock, counted from the start of
//     the latest successful Acquire or Extend; the core deducts a safety
//     margin for clock drift and treats the lock as lost when the promise
//     runs out unconfirmed. A Blocking Acquire that waited in the backend's
//     queue adds the time it waited there, as measured by the server (or
//     from the call's start to the grant when the server does not say),
//     never more than the call itself lasted: the promise starts at the
//     grant, and a wait longer than the TTL must not make every grant look
//     expired on arrival.
//  5. Silence frees the lock within a TTL. A holder that stops talking (a
//     crash, a frozen process, a cut link) loses its lock within the TTL it
//     asked for, measured by the backend. For key-with-expiry backends the
//     expiry does it. For backends whose locks live as long as a session or
//     connection (PostgreSQL advisory locks, MariaDB GET_LOCK, ZooKeeper,
//     etcd), the session must itself end within a TTL of silence: a
//     connection-bound lock on a connection that nothing closes (a TCP
//     connection whose peer froze stays open for hours) would be held for
//     ever. Set the server's idle timeout (PostgreSQL's
//     idle_session_timeout, a session TTL, a keepalive) to at most the TTL,
//     and keep the connection busy enough (Extend) to stay under it.
//  6. Fencing tokens. Every new grant's [Lease.Token] is greater than that
//     of every earlier grant of the same key, for as long as the backend
//     keeps its data. A driver that cannot promise this returns 0 and says
//     so in its documentation.
//  7. Loss reports are early, not required. [Lease.OnLoss] and
//     [Lease.Uncertain] let a backend that learns of a loss on its own
//     (a session expiring, a connection closing) tell the core before the
//     next Extend; a backend that cannot tell embeds [NoReports].
//  8. Renewal attempts are bounded by the core: ctx ending in Extend means
//     only that this attempt took too long. Never take it as the loss of the
//     lock, nor close the session or connection that holds it.
//  9. Close releases the client's own resources, never its locks: locks
//     still held end by their TTL, session or connection, as they would if
//     the process died. It closes clients the driver made itself (from a
//     URL), never one the caller passed in. Calls after Close return
//     [ErrClosed].
//
// # Backend styles
//
// The contract fits the three styles of lock backend:
//   - keys with a TTL (Redis, memcached, Hazelcast): Acquire writes a key
//     that expires by itself; Extend pushes the expiry out, owner-checked;
//   - sessions whose end frees every lock (ZooKeeper, etcd): the lease lives
//     as long as the session; Extend confirms that the session and the lock
//     are still there; OnLoss reports the session's end as soon as the
//     client learns of it, to every lease of the session;
//   - connections whose end frees the lock (PostgreSQL advisory locks): as
//     for sessions, with the connection in the role of the session
//     (requirement 5 matters most here).
//
// # Errors
//
// A driver reports "held by someone else" with [ErrLocked] (or a
// [*LockedError] carrying a retry hint), "this lease is no longer ours" with
// [ErrNotHeld], and use after Close with [ErrClosed]. Every other error is
// passed through unwrapped: the core wraps it once with the operation and
// key.
//
// A waiting Lock rides out errors that mean "the backend is unavailable for
// now" and gives up at once on any other. The core recognises broken
// connections, network timeouts, DNS failures and SQLSTATE classes of an
// unavailable server by itself; a backend's own "not now" replies (a cluster
// electing, a server loading its data) are the driver's to mark: an error
// in the chain with a method Transient() bool returning true is ridden out.
package driver

import (
	"context"
	"fmt"
	"time"
)

// Driver is one client of a lock backend. Implementations must be safe for
// concurrent use.
type Driver interface {
	// Capabilities describes what the driver can do beyond plain exclusive
	// locks. The core calls it once, when a Client is made; wrappers and the
	// conformance suite may call it again. It returns the same value every
	// time: the same facts and the same optional behaviours (keep them in
	// the driver rather than making new ones per call).
	Capabilities() Capabilities

	// Acquire takes the lock req.Key in req.Mode for req.ID.
	//
	// Without req.Block it tries once: when another owner holds the lock
	// it returns an error satisfying errors.Is(err, ErrLocked) and leaves
	// nothing behind. With req.Block (sent only to drivers that declare
	// Capabilities.Blocking) it waits in the backend's own queue until the
	// lock is granted or ctx ends.
	//
	// On success the returned Lease is held, its fencing token is new, and
	// its validity started no earlier than this call (see requirement 4
	// for a wait in the backend's queue). When ctx ends first, Acquire
	// returns ctx.Err() and leaves nothing behind (requirement 2): its queue
	// entry is removed, and a grant that raced with the cancellation is
	// released before Acquire returns.
	Acquire(ctx context.Context, req Request) (Lease, error)

	// Close releases the client's own resources (connections,
	// subscriptions) without releasing any lock (requirement 9).
	Close() error
}

// Lease is one lock held on the backend, as the driver sees it. The core owns
// its lifetime: it calls Extend to renew it and Release exactly once when the
// application unlocks. Implementations must be safe for concurrent use.
type Lease interface {
	// Token returns the lock's fencing token (requirement 6), or 0 when
	// the driver cannot promise one.
	Token() uint64

	// Validity returns how long the backend promised the lock, counted from
	// the start of the most recent successful Acquire or Extend
	// (requirement 4). It is at most the TTL asked for (less, when the
	// backend granted less: a session timeout, a quorum's drift), plus, after
	// a Blocking Acquire, the time the request waited in the backend's queue.
	Validity() time.Duration

	// Extend confirms that the lock is still this lease's and pushes its
	// expiry to ttl from now. It is owner-checked and atomic: when the lock
	// expired or belongs to someone else, Extend changes nothing and returns
	// ErrNotHeld. For session and connection backends it confirms that the
	// session or connection is alive and still holds the lock. ctx ending
	// is not a loss (requirement 8).
	Extend(ctx context.Context, ttl time.Duration) error

	// Release gives the lock up. It is owner-checked and atomic: when the
	// lock expired or belongs to someone else, Release changes nothing and
	// returns ErrNotHeld. A driver with a Notifier wakes the key's waiters
	// here.
	Release(ctx context.Context) error

	// OnLoss registers f, the one way a lease reports a loss its backend
	// told of on its own (a session expiring, a connection closing, the lock
	// removed behind the holder's back), earlier than the next Extend would
	// find it. The core calls OnLoss once, right after the grant and before
	// any Extend or Release (or not at all, when the Client closes first).
	// The lease then calls f at most once, with the reason (a non-nil
	// error): at once, from OnLoss, when it already knows. It may call f
	// from any goroutine and while holding its own locks: f returns at once
	// and calls nothing of the driver's. Once Release has returned (with
	// or without an error: the core lets the lease go either way), or a
	// Transfer from it has succeeded, it never calls f, and forgets it. A
	// backend whose client hands out a context per lock watches it with
	// context.AfterFunc, stopped by Release; since stop returns false once
	// f has started, Release waits for a call under way to end (a mutex
	// around the call and a flag that Release sets do).
	//
	// Without reports (see NoReports), the core learns of a loss from the
	// next Extend, or from the validity deadline passing unconfirmed,
	// whichever comes first.
	OnLoss(f func(reason error))

	// Uncertain returns nil while the backend is in touch, and the reason
	// while the lock's state is momentarily unknown (a client disconnected
	// while its session may still live), before any renewal fails. The core
	// reports it through its own Lease.Uncertain; the lease is still lost at
	// its validity deadline unless a renewal confirms it first. Without
	// reports (see NoReports), the core reports a lease as uncertain from a
	// failed renewal until the next successful one.
	Uncertain() error
}

// NoReports is embedded in the lease of a backend that cannot tell of a loss
// or an uncertainty on its own (keys with a TTL, mostly): it never calls the
// loss callback and is never uncertain, and the core finds a loss at the
// next Extend or at the validity deadline.
type NoReports struct{}

// OnLoss does nothing: the backend reports no loss on its own.
func (NoReports) OnLoss(func(error)) {}

// Uncertain returns nil: the backend cannot tell.
func (NoReports) Uncertain() error { return nil }

// Mode is the kind of hold a Request asks for.
type Mode uint8

const (
	// Exclusive excludes every other holder, shared or exclusive. The zero
	// Mode.
	Exclusive Mode = iota
	// Shared admits other Shared holders and excludes Exclusive ones (a read
	// lock). Only sent to drivers that declare Capabilities.Shared.
	Shared
)

// String returns "exclusive" or "shared".
func (m Mode) String() string {
	if m == Shared {
		return "shared"
	}
	return "exclusive"
}

// MarshalText returns the mode's name, as String does, so that JSON (dlock
// inspect --json) and other text encodings say "exclusive" rather than 0.
func (m Mode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText parses a name that MarshalText returns.
func (m *Mode) UnmarshalText(text []byte) error {
	switch string(text) {
	case "exclusive":
		*m = Exclusive
	case "shared":
		*m = Shared
	default:
		return fmt.Errorf("dlock: unknown lock mode %q: want exclusive or shared", text)
	}
	return nil
}

// Request describes one acquisition.
type Request struct {
	// Key is the lock's name, already validated by the core against its
	// own rules and the driver's declared ones. Drivers map it onto backend
	// names themselves.
	Key string

	// ID identifies this acquisition to the backend: 128 random bits from
	// crypto/rand, rendered as 32 lowercase hex digits. Release and Extend
	// check it, so that nobody else's lock is ever touched.
	ID string

	// TTL is how long the lock may outlive its holder's silence
	// (requirement 5).
	TTL time.Duration

	// Mode is Exclusive, or Shared for a read lock.
	Mode Mode

	// Block asks Acquire to wait in the backend's queue until the lock is
	// granted or ctx ends. Only sent to drivers that declare
	// Capabilities.Blocking.
	Block bool

	// Wait is set when the request comes from a Lock that will wait and try
	// again when refused; never from a TryLock, nor from a semaphore's tries
	// of its permits (they are TryLocks: a semaphore's waiter takes
	// whichever permit is free, so a place in one permit's line would only
	// cost requests; its gate is a Lock like any other). A driver whose
	// backend keeps a queue of waiters (for fairness across clients) may
	// queue a request with Wait when it is refused, and must not queue one
	// without it, nor make one with it cost more when the lock is free.
	//
	// With a Notifier, the core sets Wait only while it holds a subscription
	// for the key, so the subscription's Close tells the driver when the
	// last waiter gave up. Without a Notifier, it sets Wait on every try of
	// a waiting Lock, its first included, and nothing tells the driver that
	// the waiter gave up (its ctx ended, its Client closed, its process
	// died): whatever the driver keeps because of Wait (a ticket, a place
	// in a line) must lapse by itself, and may keep a free lock idle (by
	// making the waiters behind it defer) for a bounded time at most,
	// which the driver documents. LockedError.Queued is for drivers with a
	// Notifier; without one the core polls as for any refusal, no later
	// than about a millisecond after RetryAfter.
	Wait bool

	// Owner, when not empty, asks for a reentrant hold: a request whose Owner
	// matches a current holder's Owner (and Mode) is granted at once, and the
	// lock is freed when every such hold has been released. Only sent to
	// drivers that declare Capabilities.Reentrant.
	Owner string

	// Value, when not empty, is what the application says about this hold:
	// a leader election's candidate (its name or address). It is at most
	// MaxValueLen bytes of printable UTF-8, checked by the core. A driver
	// that declares Capabilities.Values stores it with the hold (and a
	// Transfer stores the new request's) and its Inspector returns it in
	// Info.Value while the hold lasts; other drivers ignore it.
	Value string
}

// MaxValueLen is the longest Request.Value the core sends.
const MaxValueLen = 256
