package dlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// Semaphore is a distributed counting semaphore: at most Permits holders of
// its key at once, across every client of the backend. Each permit is a
// [Lease], exactly like a lock's: it has a fencing token, a loss signal
// (Done, Err, Uncertain), a Deadline, background renewal (or Extend), and
// Unlock gives the permit back. A holder that vanishes frees its permit
// within its TTL.
//
// # How it works
//
// The core implements it over the driver's plain exclusive locks, so it
// works on every backend: permit i of the semaphore "KEY" is the lock
// "KEY/permit/i" (i from 0 to Permits-1), and a further lock, "KEY/gate",
// orders the waiters. TryAcquire tries the permits' locks once each,
// starting at a random one, and takes the first free one: in one request
// when the driver can try several locks at once (driver.AnyAcquirer), one
// request per lock otherwise. Acquire first
// takes the gate (a Mutex, so its waiters queue as a Mutex's do), then,
// holding it, takes the first permit that is free or becomes free, then
// releases the gate: the order in which waiters get the gate is the order
// in which they get permits. While it holds the gate it waits for a permit
// by trying every permit's lock again whenever a release of one of them may
// have happened (the driver's notifications, a release in this Client) and
// at the jittered, growing intervals of [WithPolling] regardless (capped at
// the soonest expiry of a permit when the driver reports it).
//
// Mutual exclusion of each permit's lock is what bounds the holders: a
// permit is granted only by its lock's atomic grant, never by counting. The
// keys "KEY/permit/i" and "KEY/gate" belong to the semaphore: a Mutex on
// one of them takes a permit (or the gate) away from it.
//
// # Promises
//
//   - At most Permits leases of the semaphore are valid at once (granted,
//     not unlocked, before their Deadline, not reported lost), given that
//     every user of the key passes the same Permits. A user that passes
//     fewer uses only the first that many permits, and one that passes more
//     uses more: the bound is then the largest Permits in use.
//   - A holder that vanishes (a crash, a freeze, a cut link) frees its
//     permit within its TTL, as a lock's holder does, and a holder cut off
//     from the backend is told by its lease's Deadline.
//   - Fairness: Acquire callers get permits in the order the gate grants
//     itself: first come, first served where the backend queues a lock's
//     waiters (the ZooKeeper and etcd recipes, PostgreSQL's lock queue,
//     the queue of clients beside a lock on Redis, Redis Sentinel and Redis
//     Cluster), and among one Client's goroutines on every backend; in no
//     set order between clients where it does not (memcached and RedLock,
//     which poll or are woken by notifications; Hazelcast, whose waiters
//     re-enter the member's queue every wait slice). A gate holder that
//     freezes or is cut off loses the gate by its TTL, as any lock's holder,
//     and goes back to the gate's queue when it learns of it; meanwhile
//     nobody else takes a permit through the gate. TryAcquire never waits,
//     so it does not queue: it takes a free permit even while Acquire
//     callers wait.
//
// # Fencing tokens
//
// A permit's token is its lock's: greater than the token of every earlier
// grant of the same permit, that is, of the same Lease.Key
// ("KEY/permit/i"). Tokens of different permits are not ordered: a
// resource that fences by token keeps the highest token it has seen per
// Lease.Key, and rejects a lower one presented with the same key.
//
// # What does not apply
//
// A permit is not reentrant (WithOwner is refused with ErrInvalidOption:
// every Acquire takes a permit of its own), and there is no shared mode.
// Options that apply: WithTTL, WithoutRenewal (for the permits; the gate is
// always renewed while its holder waits), WithPolling and WithFailFast.
//
// The permits are plain locks on every backend, also where the driver
// tries them all in one request: a backend's own counting structure (holders
// in one hash, a lease-node recipe) would be a second protocol, with fencing
// and loss of its own to prove, and clients that take permits one lock at a
// time would not see its holders. Over locks, every Lease promise carries
// over unchanged, and so does mixing clients that try permits one at a time
// with clients that try them all at once.
type Semaphore interface {
	// Key returns the semaphore's name.
	Key() string

	// Permits returns how many holders the semaphore admits at once.
	Permits() int

	// Acquire blocks until a permit is granted, ctx ends, or the Client is
	// closed. When ctx ends first it returns exactly ctx.Err() and leaves
	// nothing behind (no permit, no place in the gate's queue). It waits
	// through transient backend errors unless the Semaphore was made
	// WithFailFast, and returns any other error at once.
	Acquire(ctx context.Context) (Lease, error)

	// TryAcquire takes a free permit if there is one, and returns at once
	// otherwise, with an error satisfying errors.Is(err, ErrLocked), leaving
	// nothing behind. Its Lease.Key names the permit taken.
	TryAcquire(ctx context.Context) (Lease, error)
}

// MaxPermits is the most permits a Semaphore may have. Without a
// driver.AnyAcquirer, a TryAcquire of a full semaphore costs a request per
// permit, and so does every try of a waiting Acquire: past a few hundred
// permits a wait would load the backend more than it serves. With one, a
// request carries every permit's key, which bounds it as well.
const MaxPermits = 256

// permitKey is the key of permit i of the semaphore key. The map from
// (key, i) is injective: the key is what precedes the last "/permit/",
// which is followed by digits only.
func permitKey(key string, i int) string { return key + "/permit/" + strconv.Itoa(i) }

// gateKey is the key of the semaphore's gate. It ends in a letter, so no
// permit key of any semaphore is a gate key.
func gateKey(key string) string { return key + "/gate" }

// semaphore implements Semaphore over the locks of its permits.
type semaphore struct {
	c       *Client
	key     string
	cfg     config
	permits []*mutex // permit i is permits[i]
	keys    []string // the permits' keys, in the same order
	gate    *mutex
}

var _ Semaphore = (*semaphore)(nil)

// Semaphore returns the counting semaphore named key, with permits holders
// at most at once. Every user of key must pass the same permits (see
// [Semaphore]). Options override the Client's defaults for this Semaphore's
// permits. It fails with ErrInvalidPermits when permits is below 1 or above
// MaxPermits; with ErrInvalidKey when key, or a key derived from it
// ("KEY/permit/N", "KEY/gate"), breaks the core's or the driver's rules (the
// core's 1024 bytes, less the derived suffix); with ErrInvalidTTL or
// ErrInvalidOption on bad options (WithOwner among them: permits are not
// reentrant); and with ErrClosed after Close.
func (c *Client) Semaphore(key string, permits int, opts ...Option) (Semaphore, error) {
	if c.isClosed() {
		return nil, ErrClosed
	}
	if permits < 1 || permits > MaxPermits {
		return nil, fmt.Errorf("%w: %d, want 1 to %d", ErrInvalidPermits, permits, MaxPermits)
	}
	if err := checkKey(key); err != nil {
		return nil, err
	}
	s := &semaphore{c: c, key: key, permits: make([]*mutex, permits), keys: make([]string, permits)}
	derived := func(k string) (*mutex, error) {
		m, err := c.newMutex(k, opts)
		if errors.Is(err, ErrInvalidKey) {
			return nil, fmt.Errorf("%w (in a key the semaphore derives from %q: %q)", err, key, k)
		}
		return m, err
	}
	var err error
	if s.gate, err = derived(gateKey(key)); err != nil {
		return nil, err
	}
	if s.gate.cfg.owner != "" {
		return nil, fmt.Errorf("%w: WithOwner: a semaphore's permits are not reentrant", ErrInvalidOption)
	}
	// The gate is held for as long as its holder waits for a permit, which
	// may be longer than a TTL: it is always renewed.
	s.gate.cfg.renew = true
	s.cfg = s.gate.cfg
	for i := range s.permits {
		s.keys[i] = permitKey(key, i)
		if s.permits[i], err = derived(s.keys[i]); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *semaphore) Key() string  { return s.key }
func (s *semaphore) Permits() int { return len(s.permits) }

func (s *semaphore) TryAcquire(ctx context.Context) (Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l, _, err := s.tryAll(ctx)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// tryAll tries every permit's lock once, from a random one on, and returns
// the first granted. When every one is held it returns an error wrapping
// ErrLocked and the soonest expiry of a permit that the driver reported
// (zero when it reported none). A grant that arrived with no validity left
// (given back already) is passed over like a held permit, but reported
// instead of ErrLocked when nothing was granted, as TryLock reports it. Any
// other error ends the tries at once.
func (s *semaphore) tryAll(ctx context.Context) (Lease, time.Duration, error) {
	if s.c.caps.AnyAcquirer != nil {
		return s.tryAny(ctx)
	}
	first := rand.N(len(s.permits))
	var soonest time.Duration
	var expired error
	for i := range s.permits {
		l, err := s.permits[(first+i)%len(s.permits)].TryLock(ctx)
		switch {
		case err == nil:
			return l, 0, nil
		case errors.Is(err, errExpiredOnArrival):
			expired = err
			continue
		case !errors.Is(err, ErrLocked):
			return nil, 0, err
		}
		if le, ok := errors.AsType[*driver.LockedError](err); ok && le.RetryAfter > 0 && (soonest == 0 || le.RetryAfter < soonest) {
			soonest = le.RetryAfter
		}
	}
	if expired != nil {
		return nil, 0, expired
	}
	return nil, soonest, &Error{Op: "tryacquire", Key: s.key, Err: fmt.Errorf("all %d permits held: %w", len(s.permits), ErrLocked)}
}

// tryAny is tryAll in one request: it asks the driver for the first free
// permit, from a random one on (driver.AnyAcquirer). The grant becomes a
// lease of its permit's mutex exactly as a TryLock's would.
func (s *semaphore) tryAny(ctx context.Context) (Lease, time.Duration, error) {
	n := len(s.permits)
	first := rand.N(n)
	l, err := s.c.acquire(ctx, "tryacquire", s.key, driver.Exclusive, func(ctx context.Context) (*lease, error) {
		reqs := make([]driver.Request, n)
		for i := range reqs {
			id, err := newID()
			if err != nil {
				return nil, err
			}
			reqs[i] = s.permits[(first+i)%n].request(driver.Exclusive, id)
		}
		started := time.Now()
		dl, i, err := s.c.caps.AnyAcquirer.AcquireAny(ctx, reqs)
		switch {
		case errors.Is(err, ErrLocked):
			return nil, fmt.Errorf("all %d permits held: %w", n, err)
		case err != nil:
			return nil, err
		case i < 0 || i >= n:
			// A driver's bug, reported rather than guessed at: the grant
			// is given back, and its key is whichever the driver took.
			cleanup, cancel := cleanupContext(ctx, s.cfg.ttl)
			defer cancel()
			_ = dl.Release(cleanup)
			return nil, fmt.Errorf("dlock: the driver's AcquireAny granted request %d of %d", i, n)
		}
		return s.permits[(first+i)%n].granted(ctx, dl, started, driver.Exclusive)
	})
	if err != nil {
		var soonest time.Duration
		if le, ok := errors.AsType[*driver.LockedError](err); ok {
			soonest = le.RetryAfter
		}
		return nil, soonest, err
	}
	return l, 0, nil
}

// errGateLost: the gate was lost while its holder waited for a permit (it
// froze, or was cut off, past the gate's TTL): it queues at the gate again.
var errGateLost = errors.New("dlock: semaphore gate lost while waiting")

func (s *semaphore) Acquire(ctx context.Context) (Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Close waits for the Acquire, so that its subscriptions are closed
	// before the driver is.
	if !s.c.beginOp() {
		return nil, ErrClosed
	}
	defer s.c.ops.Done()
	for {
		gate, err := s.gate.Lock(ctx)
		if err != nil {
			return nil, err
		}
		l, err := s.waitForPermit(ctx, gate)
		s.leave(ctx, gate)
		switch {
		case errors.Is(err, errGateLost):
			continue
		case err != nil:
			return nil, err
		}
		return l, nil
	}
}

// leave gives the gate back, before Acquire returns even when ctx has
// ended, so that a cancelled Acquire leaves nothing behind: the release is
// bounded by the TTL instead, after which the gate ends by itself. An error
// leaves the gate to end by its TTL; a permit taken is still the caller's.
func (s *semaphore) leave(ctx context.Context, gate Lease) {
	cleanup, cancel := cleanupContext(ctx, s.cfg.ttl)
	defer cancel()
	_ = gate.Unlock(cleanup)
}
