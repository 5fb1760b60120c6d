package driver

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Capabilities is everything a driver declares about its backend, in one
// value: [Driver.Capabilities] returns it, the core reads it once when a
// Client is made, and a wrapper passes it on (replacing the optional
// behaviours with its own wrappers of them). The zero value is a driver of
// plain exclusive locks that waits by polling, with the core's key and TTL
// rules. Each field says what the core does without it.
type Capabilities struct {
	// Shared: the driver takes Requests with Mode Shared (read locks), and
	// its Exclusive locks exclude Shared holders of the same key.
	//
	// Without it, RWMutex fails with an error wrapping
	// errors.ErrUnsupported. There is no emulation: a read lock the backend
	// does not understand would not exclude other clients.
	Shared bool

	// Reentrant: the driver takes Requests with a non-empty Owner (see
	// Request.Owner).
	//
	// Without it, a Mutex with WithReentrant fails with an error wrapping
	// errors.ErrUnsupported.
	Reentrant bool

	// Blocking: the backend queues waiters itself (ZooKeeper's sequence
	// nodes, PostgreSQL's lock queue, Hazelcast's member-side queue), and
	// Acquire with Request.Block waits there until the lock is granted or
	// ctx ends (see Driver.Acquire and requirement 4 on Validity).
	//
	// A Blocking driver gets no handoff inside a Client: its waiters sit in
	// the backend's queue, where the core cannot hand them a lock, so it
	// must leave Transferer nil and TokenBlock below 2 ([Capabilities.Check]
	// and dlock.New refuse the value otherwise).
	//
	// Without it, the core waits by calling Acquire again each time a
	// Notifier wakes it, and at jittered, growing intervals regardless.
	Blocking bool

	// TokenBlock, when 2 or more, says that every new grant reserves a
	// block of fencing tokens: a grant with token T (from Acquire or
	// Transfer; not a reentrant entry, which shares its hold's token)
	// reserves T and the TokenBlock-1 tokens after it, which the backend
	// issues to nobody else, so that every later grant's token is at least
	// T+TokenBlock. The core then hands an exclusive lock to another
	// goroutine of the same Client without asking the backend at all: the
	// backend's hold stays as it is, and the next goroutine gets a lease of
	// its own with the next token of the block. Once the block is used up,
	// the core transfers (Transferer) or releases, as without it.
	//
	// Without it (0 or 1), every handoff costs at least one request: a
	// Transfer, or a release and an acquisition.
	TokenBlock uint64

	// MinTTL and MaxTTL narrow the TTLs the core accepts (10 ms to 30
	// days) to what the backend can honour; zero leaves that end as the
	// core has it. A TTL outside them fails with dlock.ErrInvalidTTL
	// before any request. Say in TTLReason why, for the error message.
	MinTTL, MaxTTL time.Duration
	// TTLReason explains MinTTL and MaxTTL to a user whose TTL they refuse
	// ("members end leases in whole seconds, up to a second early").
	TTLReason string

	// CheckKey, when not nil, refuses keys the backend cannot take beyond
	// the core's own rule (a non-empty key of at most 1024 bytes): it
	// returns nil or a plain error saying what is wrong, which the core
	// wraps into dlock.ErrInvalidKey.
	CheckKey func(key string) error

	// Notifier, when not nil, wakes waiters when a lock may have become
	// free (Redis pub/sub, watches).
	//
	// Without it, the core polls with jittered exponential backoff, never
	// sleeping past the holder's expiry when the driver reported it through
	// a LockedError.
	Notifier Notifier

	// BatchExtender, when not nil, extends many leases in one round trip.
	//
	// Without it, the core calls Lease.Extend for each lease, a few at a
	// time.
	BatchExtender BatchExtender

	// Transferer, when not nil, hands an exclusive lock from its holder to
	// another request of the same Client in one atomic round trip.
	//
	// Without it, the core releases the lock and the next waiter acquires
	// it, two round trips apart.
	Transferer Transferer

	// AnyAcquirer, when not nil, takes the first free lock among several in
	// one round trip: a semaphore tries all its permits' locks at once.
	//
	// Without it, the core tries them one request at a time.
	AnyAcquirer AnyAcquirer

	// Inspector, when not nil, describes a lock without taking it, for
	// operators (dlock inspect).
	//
	// Without it, Client.Inspect returns an error wrapping
	// errors.ErrUnsupported.
	Inspector Inspector

	// Values: the driver stores Request.Value with the hold, and its
	// Inspector (which must then be set) reports the current holder's Value
	// and fencing token together, in one Info that describes one hold:
	// never the Value of one grant with the Token of another, and never a
	// Token before the grant that carries it is settled (the value its
	// Lease.Token returns). While a hold's token and value are not settled
	// yet, the Inspector reports the lock free, or held with Token 0 and no
	// Value. Leader elections (dlock.Election) read their leader this way.
	// A grant that its request does not keep (its reply lost, then given
	// back) may be reported while it lasts: the backend did grant it.
	//
	// Without it, Election.Leader and Election.Observe return an error
	// wrapping errors.ErrUnsupported; Campaign works on every driver.
	Values bool
}

// Check reports whether the capabilities are consistent: TTL limits that
// are not negative and leave a range, and no handoff inside a Client for a
// Blocking driver. The core calls it when a Client is made, and refuses the
// driver (dlock.New returns an error wrapping dlock.ErrInvalidOption) when
// it fails; the conformance suite checks it too.
func (c Capabilities) Check() error {
	var errs []error
	if c.MinTTL < 0 || c.MaxTTL < 0 {
		errs = append(errs, fmt.Errorf("negative TTL limit (MinTTL %v, MaxTTL %v)", c.MinTTL, c.MaxTTL))
	}
	if c.MaxTTL > 0 && c.MinTTL > c.MaxTTL {
		errs = append(errs, fmt.Errorf("MinTTL %v is above MaxTTL %v", c.MinTTL, c.MaxTTL))
	}
	if c.Values && c.Inspector == nil {
		errs = append(errs, errors.New("a driver that declares Values needs an Inspector to report them"))
	}
	if c.Blocking && c.Transferer != nil {
		errs = append(errs, errors.New("a Blocking driver cannot declare a Transferer: its waiters are in the backend's queue, where no lock can be handed to them"))
	}
	if c.Blocking && c.TokenBlock > 1 {
		errs = append(errs, errors.New("a Blocking driver cannot declare a TokenBlock: its waiters are in the backend's queue, where no lock can be handed to them"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("driver capabilities: %w", err)
	}
	return nil
}

// Notifier wakes waiters when a lock may have become free. The core
// subscribes before its first Acquire, so that no release between a failed
// try and the wait goes unnoticed, and retries at once on every wake-up.
//
// Notifications are hints: a lost, late or duplicated one may cost latency,
// never correctness, because the core keeps polling with backoff beside
// them, and a wake-up is never taken as a grant.
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

// BatchExtender extends many leases in one round trip (a pipeline, a
// multi-key script). The core's renewal gathers the leases of a Client that
// are due in the same window and hands them over together.
//
// ExtendBatch extends leases[i] by ttls[i], each exactly as Lease.Extend
// would (owner-checked, atomic), and returns one error per lease, in order:
// nil, ErrNotHeld, or why that lease's extension failed. A failure must be
// reported for exactly the leases it concerns. The leases are this
// driver's own; the driver splits very large batches as its backend needs.
type BatchExtender interface {
	ExtendBatch(ctx context.Context, leases []Lease, ttls []time.Duration) []error
}

// Transferer hands an exclusive lock straight from its holder to another
// request in one round trip: the release of from and the grant to to happen
// in one atomic step, so the lock is never free in between and the handover
// costs no second request. The core uses it when a lease is unlocked while
// another goroutine of the same Client waits for the key (never more than a
// few times in a row, so that other clients' waiters get their turn).
//
// Transfer is owner-checked like Release: when from no longer holds the
// lock, it changes nothing and returns ErrNotHeld. When from holds it but
// cannot hand it over as a whole (other holds share it, from is a reentrant
// or shared hold), it changes nothing and returns ErrLocked; the core then
// releases from as usual. On success the returned Lease holds the lock for
// to.ID exactly as if Acquire(to) had granted it at this call: a new
// fencing token, greater than from's, and a validity counted from the start
// of this call; from is then spent as after its Release, and reports no
// loss any more (Lease.OnLoss).
//
// Transfer must be idempotent by to.ID: when it fails in a way that may
// have taken effect (a timeout, a lost reply), a later Acquire with the
// same request must grant the lock if the transfer happened. The core
// relies on that to recover the grant, or to give it back.
type Transferer interface {
	Transfer(ctx context.Context, from Lease, to Request) (Lease, error)
}

// AnyAcquirer takes the first free lock among several in one round trip. A
// dlock.Semaphore is a set of plain locks, one per permit; with an
// AnyAcquirer the core asks for any free permit in one request instead of
// one request per permit.
//
// AcquireAny(ctx, reqs) does what calling Acquire with reqs[0], reqs[1], ...
// in turn would do, stopping at the first grant, and returns that grant and
// its index. The core sends 1 to 256 requests for distinct keys, each
// Exclusive, without Block, Wait, Owner or Value, each with its own ID. The
// returned Lease is an ordinary lease of reqs[i].Key, in every way one that
// Acquire(reqs[i]) would have returned: its token is that key's next one
// (requirement 6), its validity counts from the start of this call, and
// Extend, Release, Transfer, BatchExtender and the Inspector treat it as
// that key's hold. A plain Acquire of that key is excluded by it, and it by
// a plain Acquire's hold: the permits stay the same locks whether they are
// asked for one at a time or all at once, so clients of either kind share a
// semaphore safely.
//
// At most one request is granted: when every lock is held, AcquireAny
// returns an error satisfying errors.Is(err, ErrLocked) (a [*LockedError]
// whose RetryAfter is the soonest expiry among them, when the backend
// tells) and leaves nothing behind. When the call fails in a way that may
// have taken effect (a timeout, a lost reply), the driver releases every
// request by its ID before returning (requirement 2). The requests need not
// be tried as one atomic step: each lock's own atomic grant is what
// excludes, and the order only decides which free lock is taken.
type AnyAcquirer interface {
	AcquireAny(ctx context.Context, reqs []Request) (Lease, int, error)
}

// Inspector describes a lock without taking it, for operators (dlock
// inspect). It is read-only, and as exact as the backend can tell.
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
	// Value is the holder's Request.Value (see Capabilities.Values); empty
	// when the lock is free, the holder gave none, or the driver does not
	// store values.
	Value string `json:"value,omitempty"`
}
