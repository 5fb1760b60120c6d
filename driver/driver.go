// Package driver defines the contract between dlock's core and its backends.
//
// Applications do not use this package: they use package dlock, whose Mutex,
// RWMutex and Lease are implemented once, by the core, over this contract.
// Driver authors implement [Driver] and [Lease], and as many of the optional
// capability interfaces ([Blocker], [Notifier], [Featurer], [Validator],
// [LossNotifier]) as their backend supports, then prove the driver with
// conformance.Run.
//
// # What the core does, so that a driver must not
//
// The core validates keys and TTLs (then asks [Validator] for the backend's own
// limits), generates the owner ID of every request, blocks and retries with
// jittered backoff, waits for notifications, renews leases, computes validity
// deadlines on the monotonic clock, signals loss, counts reentrant handles and
// wraps errors with the operation and key. A driver therefore:
//   - never retries an operation that may have been applied (the core decides);
//   - never loops waiting for a lock unless it implements [Blocker];
//   - never starts a renewal loop of its own (the core calls [Lease.Extend]);
//   - never stores a context beyond the call that received it.
//
// # Three backend styles
//
// The contract fits all three styles of lock backend:
//   - lease keys with a TTL (Redis, memcached, Hazelcast): TryAcquire writes a
//     key that expires by itself; Extend pushes the expiry out, owner-checked;
//   - sessions whose end frees every lock (ZooKeeper, etcd): the lease lives as
//     long as the session; Extend confirms that the session and the lock are
//     still there; [LossNotifier] reports the session's end as soon as the
//     client learns of it, to every lease of the session;
//   - connections whose end frees the lock (PostgreSQL advisory locks): as for
//     sessions, with the connection in the role of the session.
//
// In every style [Lease.Validity] tells the core how long the backend promises
// the lock from the start of the latest successful acquire or extend, and the
// core treats the lock as lost when that promise runs out unconfirmed.
//
// # Errors
//
// A driver reports "held by someone else" with [ErrLocked] (or a [*LockedError]
// carrying a retry hint), "this lease is no longer ours" with [ErrNotHeld], and
// use after Close with [ErrClosed]. Every other error is passed through
// unwrapped: the core wraps it once with the operation and key.
//
// A waiting Lock rides out errors that mean "the backend is unavailable for
// now" and gives up at once on any other. The core recognises broken
// connections, network timeouts, DNS failures and SQLSTATE classes of an
// unavailable server by itself; a backend's own "not now" replies (a cluster
// electing, a server loading its data) are the driver's to mark: an error
// in the chain with a method Transient() bool returning true is ridden out.
// When the caller's context has ended, return ctx.Err(), not the error of
// the request it cut short, and release whatever the request may have left
// behind (by [Request.ID]) before returning.
package driver

import (
	"context"
	"time"
)

// Driver is one client of a lock backend. Each Driver is independent of any
// other Driver on the same backend: two Drivers made from two Open calls
// exclude each other exactly as two processes would.
//
// Implementations must be safe for concurrent use.
type Driver interface {
	// TryAcquire tries once to take the lock req.Key in req.Mode for req.ID,
	// without waiting for other holders. When another owner holds the lock it
	// returns an error satisfying errors.Is(err, ErrLocked) and leaves nothing
	// behind on the backend.
	//
	// On success the returned Lease is held, its fencing token is new, and its
	// validity started no earlier than this call. When ctx ends first, the
	// driver returns ctx's error and must not leave a lock behind: if the
	// backend may have applied the request, the driver releases it (by req.ID)
	// before returning.
	TryAcquire(ctx context.Context, req Request) (Lease, error)

	// Close releases the client's own resources (connections, subscriptions)
	// without releasing any lock: locks still held end by their TTL, session or
	// connection, as they would if the process died. Close closes clients the
	// driver created itself (from a URL), never a client the caller passed in.
	// Operations after Close return ErrClosed.
	Close() error
}

// Lease is one lock held on the backend, as the driver sees it. The core owns
// its lifetime: it calls Extend to renew it and Release exactly once when the
// application unlocks. Implementations must be safe for concurrent use.
type Lease interface {
	// Token returns the lock's fencing token: a number the backend issued for
	// this grant, greater than the token of every earlier grant of the same key
	// for as long as the backend keeps its data. A driver that cannot promise
	// this documents it and returns 0.
	Token() uint64

	// Validity returns how long the backend promised the lock, counted from the
	// start of the most recent successful TryAcquire, Acquire or Extend. It is
	// at most the TTL asked for (less, when the backend granted less: a session
	// timeout, a quorum's drift), plus, after a Blocker's Acquire, the time the
	// request waited in the backend's queue as the driver measured it (the
	// lease starts at the grant, not at the call; without that time, a wait
	// longer than the TTL would make every grant look expired on arrival).
	Validity() time.Duration

	// Extend confirms that the lock is still this lease's and pushes its expiry
	// to ttl from now. It is owner-checked and atomic: when the lock expired or
	// belongs to someone else, Extend changes nothing and returns ErrNotHeld.
	// For session and connection backends it confirms that the session or
	// connection is alive and still holds the lock.
	//
	// The core bounds each renewal attempt (to about a third of the validity)
	// and retries a failed one: ctx ending means only that this attempt took
	// too long. A driver must not take it as the loss of the lock, nor close
	// the session or connection that holds it.
	Extend(ctx context.Context, ttl time.Duration) error

	// Release gives the lock up. It is owner-checked and atomic: when the lock
	// expired or belongs to someone else, Release changes nothing and returns
	// ErrNotHeld. A driver with a Notifier wakes the key's waiters here.
	Release(ctx context.Context) error
}

// Mode is the kind of hold a Request asks for.
type Mode uint8

const (
	// Exclusive excludes every other holder, shared or exclusive. The zero
	// Mode.
	Exclusive Mode = iota
	// Shared admits other Shared holders and excludes Exclusive ones (a read
	// lock). Only sent to drivers whose Features include Shared.
	Shared
)

// String returns "exclusive" or "shared".
func (m Mode) String() string {
	if m == Shared {
		return "shared"
	}
	return "exclusive"
}

// Request describes one acquisition.
type Request struct {
	// Key is the lock's name, already validated by the core and by the
	// driver's Validator. Drivers map it onto backend names themselves.
	Key string

	// ID identifies this acquisition to the backend: 128 random bits from
	// crypto/rand, rendered as 32 lowercase hex digits. Release and Extend
	// check it, so that nobody else's lock is ever touched.
	ID string

	// TTL is how long the lock may outlive its holder's silence.
	TTL time.Duration

	// Mode is Exclusive, or Shared for a read lock.
	Mode Mode

	// Wait is set when the request comes from a Lock that will wait and try
	// again, not from a TryLock. A driver whose backend keeps a queue of
	// waiters (for fairness across clients) may queue it when refused, and
	// must not queue requests without it. With a Notifier, the core sets it
	// only while it holds a subscription for the key, so the subscription's
	// Close tells the driver when the last waiter gave up.
	Wait bool

	// Owner, when not empty, asks for a reentrant hold: a request whose Owner
	// matches a current holder's Owner (and Mode) is granted at once, and the
	// lock is freed when every such hold has been released. Only sent to
	// drivers whose Features include Reentrant.
	Owner string
}
