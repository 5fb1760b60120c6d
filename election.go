package dlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/dlock-go/dlock/driver"
)

// Election is a leader election among the candidates of one key, across
// every client of the backend: at most one of them leads at a time.
//
// # How it works
//
// Leadership is the exclusive lock named by the election's key, taken with
// the candidate's value stored beside the hold (driver.Request.Value).
// Campaign is a Mutex's Lock: it waits (queued, notified or polling, as a
// Lock waits on this backend) until the lock is granted, and returns the
// grant as a [Lease]. So leadership has every promise of a lock's lease: its
// fencing token is the term, greater than every earlier term of the key;
// it is renewed in the background; Done fires and Err says why when it is
// lost (a renewal refused, a session ended, the validity deadline passed
// while the leader was cut off or frozen); Unlock (or Resign) gives it up,
// and a leader that vanishes leaves it free within its TTL.
//
// Leader and Observe read the lock's holder through the driver's inspection:
// the holder's value and token, which the driver reports together, from one
// hold (driver.Capabilities.Values). Drivers that cannot store a value with
// a hold support Campaign and Resign only; their Leader and Observe return
// an error wrapping errors.ErrUnsupported.
//
// The invariant that makes it safe is the lock's: a candidate leads only by
// the backend's atomic grant of the key to its own request, never because
// it saw the key free or was told so, and it stops leading at its lease's
// Deadline unless the backend confirmed the hold before it. Observations are
// only reports: a follower may learn of a change late, never of a leader
// the backend did not grant.
//
// The key belongs to the election: a Mutex on it takes the leadership away
// from every candidate, and Leader then reports it with an empty value.
// Leadership is never handed between goroutines of one Client without the
// backend (the in-process handoff of locks is off for elections), so that
// the backend always holds the leader's own value and term.
//
// Options that apply: WithTTL, WithoutRenewal, WithPolling (also the pace
// at which Observe looks, between notifications) and WithFailFast. WithOwner
// is refused with ErrInvalidOption: leadership is not reentrant.
type Election interface {
	// Key returns the election's name.
	Key() string

	// Campaign blocks until this candidate leads, ctx ends, or the Client
	// is closed, and returns the leadership as a Lease whose Token is the
	// term. value tells followers who leads (a name, an address): 1 to
	// MaxValueLen bytes of printable UTF-8, or ErrInvalidValue. When ctx
	// ends first it returns exactly ctx.Err() and leaves nothing behind. An
	// Election is one candidate: while an earlier Campaign of it waits or
	// its leadership lasts, Campaign fails with ErrCampaigning.
	Campaign(ctx context.Context, value string) (Lease, error)

	// Resign gives up the leadership the latest Campaign won, as its
	// Lease's Unlock does; ErrNotHeld when there is none, or it had ended.
	Resign(ctx context.Context) error

	// Leader reports who leads now: the leader's value and term, as the
	// backend holds them. When nobody leads, or a new leadership is not yet
	// settled on the backend (its term not yet written beside it), it
	// returns ErrNoLeader.
	Leader(ctx context.Context) (Leadership, error)

	// Observe reports each change of leader, in order, on the returned
	// channel: the leader found at the start, then every leadership found
	// after it, each with a greater term than the one before, and the zero
	// Leadership when the leadership falls vacant. It looks again at every
	// notification of a release the driver sends and at the jittered
	// intervals of WithPolling regardless (quicker after a change), so a
	// leadership that begins and ends between two looks is not reported:
	// terms reported in a row need not be consecutive. Backend errors are
	// ridden out: Observe goes on looking. The channel is closed when ctx
	// ends or the Client closes; a reader that falls behind delays the
	// looks, and loses nothing.
	Observe(ctx context.Context) (<-chan Leadership, error)
}

// Leadership is one leader as the backend reports it.
type Leadership struct {
	// Value is the value the leader campaigned with; empty when the key is
	// held by a Mutex rather than a candidate.
	Value string
	// Term is the leadership's fencing token: the Token of the leader's
	// Lease. It rises with every new leadership of the key; zero when
	// nobody leads (or the driver cannot issue tokens).
	Term uint64
}

// MaxValueLen is the longest value a candidate may campaign with.
const MaxValueLen = driver.MaxValueLen

var (
	// ErrInvalidValue: a Campaign's value is empty, longer than
	// MaxValueLen bytes, or not printable UTF-8.
	ErrInvalidValue = errors.New("dlock: invalid election value")

	// ErrNoLeader: Leader found nobody leading.
	ErrNoLeader = errors.New("dlock: no leader")

	// ErrCampaigning: Campaign on an Election that is already campaigning
	// or leading; one Election is one candidate.
	ErrCampaigning = errors.New("dlock: election already campaigning or leading")
)

// election implements Election over one exclusive lock.
type election struct {
	c    *Client
	key  string
	opts []Option
	cfg  config // as a Mutex of the key would have it

	mu          sync.Mutex
	campaigning bool  // a Campaign is under way
	lease       Lease // the latest leadership, nil before the first
}

var _ Election = (*election)(nil)

// Election returns the leader election named key. Options override the
// Client's defaults for its leadership leases. It fails with ErrInvalidKey,
// ErrInvalidTTL or ErrInvalidOption (WithOwner among them) as Client.Mutex
// does, and with ErrClosed after Close.
func (c *Client) Election(key string, opts ...Option) (Election, error) {
	m, err := c.newMutex(key, opts)
	if err != nil {
		return nil, err
	}
	if m.cfg.owner != "" {
		return nil, fmt.Errorf("%w: WithOwner: leadership is not reentrant", ErrInvalidOption)
	}
	return &election{c: c, key: key, opts: opts, cfg: m.cfg}, nil
}

func (e *election) Key() string { return e.key }

func (e *election) Campaign(ctx context.Context, value string) (Lease, error) {
	if err := checkValue(value); err != nil {
		return nil, err
	}
	if err := e.begin(); err != nil {
		return nil, err
	}
	m, err := e.c.newMutex(e.key, e.opts)
	var l Lease
	if err == nil {
		m.cfg.value = value
		l, err = m.Lock(ctx)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.campaigning = false
	if err != nil {
		return nil, err
	}
	e.lease = l
	return l, nil
}

// begin marks a Campaign under way, refusing a second one while the first
// waits or its leadership lasts.
func (e *election) begin() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.campaigning {
		return ErrCampaigning
	}
	if e.lease != nil {
		select {
		case <-e.lease.Done():
		default:
			return ErrCampaigning
		}
	}
	e.campaigning = true
	return nil
}

func (e *election) Resign(ctx context.Context) error {
	e.mu.Lock()
	l := e.lease
	e.mu.Unlock()
	if l == nil {
		return &Error{Op: "resign", Key: e.key, Err: ErrNotHeld}
	}
	return l.Unlock(ctx)
}

func (e *election) Leader(ctx context.Context) (Leadership, error) {
	if !e.c.caps.Values {
		return Leadership{}, fmt.Errorf("dlock: election leader: %w by this driver (it stores no value with a lock)", errors.ErrUnsupported)
	}
	info, err := e.c.Inspect(ctx, e.key)
	if err != nil {
		return Leadership{}, err
	}
	// Token 0 on a held lock is a grant not settled yet (its token and
	// value not yet written beside it): no leader the backend can name.
	if !info.Held || info.Mode != driver.Exclusive || info.Token == 0 {
		return Leadership{}, &Error{Op: "leader", Key: e.key, Err: ErrNoLeader}
	}
	return Leadership{Value: info.Value, Term: info.Token}, nil
}

// checkValue applies the rule for a candidate's value: 1 to MaxValueLen
// bytes of UTF-8 without control characters, so that every backend can
// store it as text and an operator can print it.
func checkValue(v string) error {
	switch {
	case v == "" || len(v) > MaxValueLen:
		return fmt.Errorf("%w: must be 1 to %d bytes, got %d", ErrInvalidValue, MaxValueLen, len(v))
	case !utf8.ValidString(v):
		return fmt.Errorf("%w: not UTF-8", ErrInvalidValue)
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: control character %U", ErrInvalidValue, r)
		}
	}
	return nil
}
