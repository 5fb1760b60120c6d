package driver

import (
	"context"
	"time"
)

// The optional interfaces below are the only way a driver declares what its
// backend can do beyond Driver and Lease. The core type-asserts them; users
// never do. Each documents what the core does when a driver lacks it.

// Blocker is implemented by drivers whose backend queues waiters itself
// (ZooKeeper's sequence nodes, PostgreSQL's lock queue, Hazelcast's member-side
// queue). Acquire waits server-side until the lock is granted or ctx ends.
//
// When ctx ends, Acquire returns ctx's error and leaves nothing behind: its
// queue entry is removed, and a grant that raced with the cancellation is
// released before Acquire returns. Otherwise it behaves as TryAcquire.
//
// Fallback: without Blocker, the core waits by calling TryAcquire again each
// time a Notifier wakes it, and at jittered, growing intervals regardless.
type Blocker interface {
	Acquire(ctx context.Context, req Request) (Lease, error)
}

// Notifier is implemented by drivers whose backend can tell waiters that a lock
// may have become free (Redis pub/sub, watches). The core subscribes before its
// first TryAcquire, so that no release between a failed try and the wait goes
// unnoticed, and retries at once on every wake-up.
//
// Notifications are hints: a lost one may cost latency, never correctness,
// because the core keeps polling with backoff beside them.
//
// Fallback: without Notifier, the core polls with jittered exponential backoff,
// never sleeping past the holder's expiry when the driver reported it through a
// LockedError.
type Notifier interface {
	// Subscribe starts listening for releases of key. The subscription's
	// channel receives a value (non-blocking, coalesced) after each release.
	Subscribe(ctx context.Context, key string) (Subscription, error)
}

// Subscription is a Notifier's stream of wake-ups for one key.
type Subscription interface {
	// C returns the channel that receives a value when the key may be free.
	// It is buffered: wake-ups that arrive while nobody reads are coalesced.
	C() <-chan struct{}
	// Close ends the subscription. It is safe to call more than once.
	Close() error
}

// Features lists the request kinds a driver accepts beyond plain exclusive
// locks.
type Features struct {
	// Shared: the driver takes Requests with Mode Shared (read locks), and its
	// Exclusive locks exclude Shared holders of the same key.
	Shared bool
	// Reentrant: the driver takes Requests with a non-empty Owner.
	Reentrant bool
}

// Featurer is implemented by drivers that support more than exclusive,
// non-reentrant locks.
//
// Fallback: without it, or for a feature it reports false, the core refuses
// the request with an error wrapping errors.ErrUnsupported and never sends it
// to the driver. There is no emulation: a read lock or a reentrant lock that
// the backend does not understand would not exclude other clients.
type Featurer interface {
	Features() Features
}

// Validator is implemented by drivers whose backend limits keys or TTLs beyond
// the core's own rules (a non-empty key of at most 1024 bytes; a TTL from
// 10 ms to 30 days). Each method returns nil or a plain error saying what is
// wrong; the core wraps it into its ErrInvalidKey or ErrInvalidTTL.
//
// Fallback: without it, the core's rules alone apply.
type Validator interface {
	ValidateKey(key string) error
	ValidateTTL(ttl time.Duration) error
}

// LossNotifier is implemented by leases whose backend reports a loss on its
// own (a session expiring, a connection closing, the lock removed behind the
// holder's back), earlier than the next Extend would find it. It is the
// cheaper of the two ways to report one (see LossReporter): a held lock then
// costs the driver a field, and whatever registry of leases it keeps per
// session or connection, rather than a context per lease.
//
// The core calls OnLoss once, right after the grant and before any Extend or
// Release (or not at all, when Close ends the lease first). The lease then
// calls f at most once, when it learns that the lock is lost, with the
// reason (a non-nil error): at once, from OnLoss, when it already knows. It may call f from
// any goroutine and while holding its own locks: f returns at once and calls
// nothing of the driver's. Once Release has returned it never calls f (the
// core has let the lease go), and forgets it. The conformance suite's
// LossReports case checks this much on the driver directly.
//
// Fallback: a lease without it may implement LossReporter; without either,
// the core learns of a loss from the next Extend, or from the validity
// deadline passing unconfirmed, whichever comes first.
type LossNotifier interface {
	OnLoss(f func(reason error))
}

// LossReporter is the context-shaped form of LossNotifier, for leases whose
// backend client already hands out a context per lock. Lost returns a
// context that is cancelled when the lease is lost, with the reason as its
// cause (context.Cause). The core watches it with context.AfterFunc, so it
// costs no goroutine, but a watched context per held lock costs some
// hundreds of bytes of heap: a driver that can implements LossNotifier
// instead. The core uses LossNotifier when a lease implements both.
//
// Fallback: without it (or LossNotifier), the core learns of a loss from the
// next Extend, or from the validity deadline passing unconfirmed, whichever
// comes first.
type LossReporter interface {
	Lost() context.Context
}

// UncertaintyReporter is implemented by leases whose backend can tell that
// the lock's state is momentarily unknown (a ZooKeeper client disconnected
// while its session may still live) before any renewal fails. Uncertain
// returns nil while the backend is in touch, and the reason otherwise. The
// core reports it through Lease.Uncertain; the lease is still lost at its
// validity deadline unless a renewal confirms it first.
//
// Fallback: without it, the core reports a lease as uncertain from a failed
// renewal until the next successful one.
type UncertaintyReporter interface {
	Uncertain() error
}

// BatchExtender is implemented by drivers that can extend many leases in one
// round trip (a pipeline, a multi-key script). The core's renewal gathers the
// leases of a client that are due in the same window and hands them over
// together. ExtendBatch extends leases[i] by ttls[i], each exactly as
// Lease.Extend would (owner-checked, atomic), and returns one error per lease,
// in order: nil, ErrNotHeld, or why that lease's extension failed. A failure
// must be reported for exactly the leases it concerns. The leases are this
// driver's own; the driver splits very large batches as its backend needs.
//
// Fallback: without it, the core calls Lease.Extend for each lease, a few at
// a time.
type BatchExtender interface {
	ExtendBatch(ctx context.Context, leases []Lease, ttls []time.Duration) []error
}

// Inspector is implemented by drivers that can describe a lock without
// taking it, for operators (dlock inspect). It is read-only, and as exact as
// the backend can tell.
//
// Fallback: without it, Client.Inspect returns an error wrapping
// errors.ErrUnsupported.
type Inspector interface {
	Inspect(ctx context.Context, key string) (Info, error)
}

// Info describes one lock as the backend sees it.
type Info struct {
	// Held reports whether anyone holds the lock.
	Held bool `json:"held"`
	// Mode of the hold; Holders counts shared holders (1 when exclusive).
	Mode    Mode `json:"mode"`
	Holders int  `json:"holders"`
	// Owner identifies the holder where the backend stores it: the
	// reentrant owner, or the acquisition's ID. Empty when unknown.
	Owner string `json:"owner,omitempty"`
	// Token is the current grant's fencing token (or the latest one issued,
	// when the lock is free). Zero when unknown.
	Token uint64 `json:"token"`
	// TTL is the time left on the holder's lease; zero when unknown or when
	// the lock lasts as long as a session or connection.
	TTL time.Duration `json:"ttl_ns"`
	// Waiters counts clients waiting for the lock, as far as the backend can
	// tell; -1 when it cannot.
	Waiters int `json:"waiters"`
}

// Transferer is implemented by drivers that can hand an exclusive lock
// straight from its holder to another request in one round trip: the
// release of from and the grant to to happen in one atomic step, so the
// lock is never free in between and the handover costs no second request.
// The core uses it when a lease is unlocked while another goroutine of the
// same Client waits for the key (never more than a few times in a row, so
// that other clients' waiters get their turn).
//
// Transfer is owner-checked like Release: when from no longer holds the
// lock, it changes nothing and returns ErrNotHeld. When from holds it but
// cannot hand it over as a whole (other holds share it, from is a reentrant
// or shared hold), it changes nothing and returns ErrLocked; the core then
// releases from as usual. On success the returned Lease holds the lock for
// to.ID exactly as if TryAcquire(to) had granted it at this call: a new
// fencing token, greater than from's, and a validity counted from the start
// of this call.
//
// Transfer must be idempotent by to.ID: when it fails in a way that may
// have taken effect (a timeout, a lost reply), a later TryAcquire with the
// same request must grant the lock if the transfer happened. The core
// relies on that to recover the grant, or to give it back.
//
// Fallback: without it, the core releases the lock and the next waiter
// acquires it, two round trips apart.
type Transferer interface {
	Transfer(ctx context.Context, from Lease, to Request) (Lease, error)
}
