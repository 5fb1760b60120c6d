// Package dlock is one distributed-lock API over many backends: Redis,
// ZooKeeper, memcached, Hazelcast, PostgreSQL advisory locks, etcd and an
// in-process reference backend.
//
// An application opens a [Client] from a URL whose scheme names the backend
// (the driver registers it when its package is imported), takes a [Mutex] per
// key, and locks it:
//
//	client, err := dlock.Open(ctx, "redis://localhost:6379/0")
//	...
//	defer client.Close(ctx)
//	m, err := client.Mutex("reports/nightly")
//	...
//	lease, err := m.Lock(ctx)
//	...
//	defer lease.Unlock(ctx)
//	err = store.Write(ctx, lease.Token(), report) // the store rejects stale tokens
//
// # Leases, fencing and loss
//
// Every held lock is a [Lease]: the backend promises it for a TTL, and the
// core renews it in the background (every TTL/3, or a third of the shorter
// validity a backend grants) for as long as it is held.
// No lease survives every fault: a process pause or a partition longer than
// the TTL lets another client take the lock while the old holder still runs.
// dlock therefore gives every holder two defences:
//
//   - a fencing token ([Lease.Token]), greater for every grant of a key, that a
//     protected resource can check to reject writes from an older holder;
//   - a loss signal ([Lease.Done] and [Lease.Err]) that fires when renewal is
//     refused, when the backend reports the lock gone, and at the latest at
//     the validity deadline ([Lease.Deadline]): the start of the last
//     confirmed acquire or renewal, plus the TTL, minus a safety margin of
//     TTL/100 + 2 ms for clock drift, measured on the monotonic clock.
//
// # Capabilities
//
// Exclusive locks work on every backend. Read-write locks ([Client.RWMutex])
// and reentrant locks ([WithOwner]) need backend support; where a driver lacks
// it, the call returns an error wrapping errors.ErrUnsupported. Waiting uses
// the backend's own queue or notifications where it has them, and jittered,
// expiry-aware polling otherwise.
//
// # Waiting inside one Client
//
// The goroutines of one Client that wait for the same lock share one backend
// wait and are served in arrival order. An Unlock while another of them waits
// hands the lock straight over: with no request at all where the driver
// reserves a block of fencing tokens per grant (the next goroutine takes the
// block's next token, so tokens still rise from holder to holder), in one
// round trip where it can transfer a lock, and by a release otherwise. After
// 8 handoffs in a row the lock is released, so that other clients get their
// turn.
//
// # Semaphores
//
// [Client.Semaphore] admits at most N holders of a key at once, each with a
// Lease of its own (fencing token, loss signal, renewal), on every backend:
// the core builds it over N locks, one per permit, and a gate that orders
// its waiters (see [Semaphore]).
//
// # Outages
//
// A Lock or RLock that waits rides out a backend that restarts, fails over
// or is paused: it keeps trying, with the jittered backoff of [WithPolling],
// until the lock is granted, its context ends, or the Client closes, and
// reports every failed attempt (a Warn log record through [WithLogger], and
// the metric dlock.acquire.errors). [WithFailFast] turns this off. TryLock
// and TryRLock never wait, so they return every error at once.
//
// Only transient errors are ridden out, those of a backend that could not
// be reached or did not answer: a net.Error that is a timeout, or
// context.DeadlineExceeded while the caller's context is live (a driver's
// own timeout); io.EOF, io.ErrUnexpectedEOF, net.ErrClosed, connection
// refused, reset or aborted, a broken pipe, a host or network unreachable
// or down; a *net.DNSError (a restarting container's name disappears from
// its network's DNS meanwhile); an SQL error whose SQLState() (as pgx's
// and lib/pq's errors have) is a connection exception (class 08) or a
// server shutting down or starting up (57P01, 57P02, 57P03); and any error
// in the chain with a method Transient() bool that returns true, which is
// how a driver marks its backend's own "not ready yet" replies. Every other error is permanent and
// returned at once: [ErrInvalidKey], [ErrInvalidTTL], [ErrInvalidOption],
// errors.ErrUnsupported, [ErrClosed], the caller's context ending, and every
// refusal the backend sends (a wrong password, a missing permission, a
// protocol or TLS failure), so that a misconfiguration the backend reports
// never makes Lock wait. One that looks like an outage from the client's
// side (a wrong address, where every connection is refused) is waited
// through like one, visibly in the logs and metrics.
//
// An attempt that failed may have been applied by the backend all the same
// (the connection broke after the request went out): each retry is a new
// request, and drivers give back by request ID whatever a request of
// unknown outcome may have taken (package driver).
//
// # Errors
//
// Errors are comparable with errors.Is against the sentinels in this package
// ([ErrLocked], [ErrNotHeld], [ErrLockLost], [ErrClosed], [ErrInvalidKey],
// [ErrInvalidTTL], [ErrInvalidURL], [ErrInvalidOption], [ErrInvalidPermits]).
// A call whose context
// ends returns exactly ctx.Err(). Backend errors are wrapped once in an
// [*Error] naming the operation and key, so errors.As still reaches the
// client library's own error types.
package dlock

import (
	"context"
	"time"
)

// Mutex is a distributed mutual-exclusion lock on one key. It is implemented
// by the core over whichever driver the Client was opened with; applications
// may implement it themselves to fake locking in their own tests.
//
// A Mutex holds no state of its own between calls: every successful Lock or
// TryLock returns a new [Lease], and it is the Lease that is unlocked. One
// Mutex may be used by many goroutines at once.
type Mutex interface {
	// Key returns the lock's name.
	Key() string

	// Lock blocks until the lock is acquired, ctx ends, or the Client is
	// closed. When ctx ends first it returns exactly ctx.Err() and leaves
	// nothing behind on the backend. It waits through transient backend
	// errors (an outage, a restart: see Outages in the package
	// documentation) unless the Mutex was made WithFailFast, and returns
	// any other error at once.
	Lock(ctx context.Context) (Lease, error)

	// TryLock acquires the lock if it is free and returns at once otherwise,
	// with an error satisfying errors.Is(err, ErrLocked).
	TryLock(ctx context.Context) (Lease, error)
}

// RWMutex is a distributed reader/writer lock on one key: any number of
// readers, or one writer. Its Lock and TryLock take the write lock, which is
// the same lock a [Mutex] on the same key takes.
type RWMutex interface {
	Mutex

	// RLock blocks until a read lock is acquired, ctx ends, or the Client is
	// closed, like Lock.
	RLock(ctx context.Context) (Lease, error)

	// TryRLock acquires a read lock if no writer holds the key, and returns
	// at once otherwise with an error satisfying errors.Is(err, ErrLocked).
	TryRLock(ctx context.Context) (Lease, error)
}

// Lease is a held lock. It stays held until Unlock, until the Client is
// closed, or until it is lost; Done tells when it ended and Err why.
type Lease interface {
	// Key returns the lock's name.
	Key() string

	// Token returns the fencing token of this grant: greater than that of
	// every earlier grant of the key, for as long as the backend keeps its
	// data (each driver states its scope). Pass it to the resources the lock
	// protects, and have them reject tokens lower than one they have seen.
	// Zero when the backend cannot issue fencing tokens.
	//
	// A lease handed over inside the Client without asking the backend (see
	// driver.Capabilities.TokenBlock) has the next token of the block its backend grant
	// reserved, so the backend reports the grant's first token (Inspect)
	// while the lease's is greater by the number of handoffs since.
	Token() uint64

	// Deadline returns the validity deadline: the lease is not to be trusted
	// at or after it unless a renewal moves it. It carries a monotonic clock
	// reading, so time.Until(Deadline()) is immune to wall-clock jumps.
	Deadline() time.Time

	// Done returns a channel that is closed when the lease ends: when it is
	// lost, unlocked, or its Client closed.
	Done() <-chan struct{}

	// Err returns nil while the lease is held. After Done is closed it says
	// why: an error satisfying errors.Is(err, ErrLockLost) (with the reason
	// wrapped inside) when the lock was lost, ErrNotHeld after Unlock, or
	// ErrClosed when the Client was closed. Once Unlock has returned, Err
	// agrees with it: when Unlock reported a loss, Err returns that same
	// error (a loss Unlock itself found: Err said ErrNotHeld while that
	// Unlock was under way), and otherwise ErrNotHeld.
	Err() error

	// Uncertain returns nil while the backend has confirmed the lease
	// recently, and otherwise why its state is unknown for now: the last
	// renewal failed, or the backend reported its connection down. An
	// uncertain lease is still held until its Deadline; it becomes lost then
	// unless a renewal confirms it first. Careful holders pause risky writes
	// while it is uncertain.
	Uncertain() error

	// Extend renews the lease now, for the Mutex's TTL from the start of the
	// call, and moves the Deadline. Renewal does this automatically unless it
	// was switched off with WithoutRenewal. When the backend reports that the
	// lock is no longer this lease's, the lease is lost and Extend returns
	// the same error as Err.
	Extend(ctx context.Context) error

	// Unlock releases the lock. It never touches a lock that has meanwhile
	// passed to another holder. It returns:
	//   - nil when the lock was released, or handed to a waiter, or found
	//     already expired on the backend by a release that was held up (a
	//     slow or paused backend) until after the lease's Deadline: Unlock
	//     was called inside the lease's validity, and the lock is free, as
	//     asked;
	//   - an error satisfying errors.Is(err, ErrLockLost), the same as Err
	//     then returns, when the lease was lost before Unlock (its Deadline
	//     had passed, or its loss was reported), or when the backend says it
	//     no longer held the lock before the lease's Deadline (a loss nothing
	//     had reported);
	//   - ErrNotHeld when the lease had already been unlocked, and
	//     ErrClosed when its Client was closed, or when Close stopped
	//     waiting for this release (its context ended first);
	//   - exactly ctx.Err() when ctx ended (the release then goes on in the
	//     background, bounded by the TTL);
	//   - otherwise an *Error wrapping the backend's error: the release was
	//     not confirmed, and the lock ends by its TTL unless it went through.
	// After any of them the lease has ended, and Close waits for an Unlock
	// under way before it closes the driver.
	Unlock(ctx context.Context) error
}
