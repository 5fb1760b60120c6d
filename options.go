package dlock

import (
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// DefaultTTL is the TTL of a Mutex when neither the Client nor the Mutex was
// given WithTTL. A crashed holder blocks others for at most this long.
const DefaultTTL = 15 * time.Second

// Default polling bounds. With notifications, polling is only a safety net for
// a lost message, so it starts slower.
const (
	defaultPollMin         = 2 * time.Millisecond
	defaultPollMax         = 250 * time.Millisecond
	defaultNotifiedPollMin = 50 * time.Millisecond
	defaultNotifiedPollMax = time.Second
)

// Option configures a Client (as the default for all its mutexes) or one
// Mutex. Options given to Client.Mutex override the Client's.
type Option func(*config) error

// config is the resolved configuration of one mutex.
type config struct {
	// Client-level settings (telemetry.go); clientLevel marks that one was
	// given, which Client.Mutex refuses.
	meters      metric.MeterProvider
	tracers     trace.TracerProvider
	logger      *slog.Logger
	clientLevel bool

	ttl        time.Duration
	renew      bool
	owner      string
	pollMin    time.Duration
	pollMax    time.Duration
	pollCustom bool
	failFast   bool
	// value is stored with every hold (driver.Request.Value): set only by
	// an Election's Campaign, for its own mutex.
	value string
}

func defaultConfig() config {
	return config{ttl: DefaultTTL, renew: true}
}

func (c config) with(opts []Option) (config, error) {
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&c); err != nil {
			return c, err
		}
	}
	return c, nil
}

// WithTTL sets how long a lock outlives its holder's silence: the lease
// length, renewed every TTL/3 (or a third of the shorter validity a backend
// grants) while held. Default: DefaultTTL (15 s). The
// core accepts 10 ms to 30 days; drivers may narrow that (see each driver's
// documentation), which is checked when the Mutex is made.
func WithTTL(ttl time.Duration) Option {
	return func(c *config) error {
		if err := checkTTL(ttl); err != nil {
			return err
		}
		c.ttl = ttl
		return nil
	}
}

// WithoutRenewal switches automatic renewal off: the lease then ends at its
// Deadline unless the holder calls Lease.Extend in time. Default: renewal on.
func WithoutRenewal() Option {
	return func(c *config) error {
		c.renew = false
		return nil
	}
}

// WithOwner makes the Mutex reentrant for the owner identity given: while one
// lease of owner holds the lock, further Lock calls with the same owner
// (from this or any other client) succeed at once, each returning a lease of
// its own with the same fencing token, and the lock is free again when every
// one of them has been unlocked. Go has no goroutine identity, so the owner
// is explicit: a request ID, a job name, a worker ID. Needs a driver with
// reentrancy; others return an error wrapping errors.ErrUnsupported.
// Default: not reentrant.
func WithOwner(owner string) Option {
	return func(c *config) error {
		if owner == "" || len(owner) > maxKeyLen {
			return fmt.Errorf("%w: owner must be 1 to %d bytes, got %d", ErrInvalidOption, maxKeyLen, len(owner))
		}
		c.owner = owner
		return nil
	}
}

// WithPolling sets the bounds of the jittered exponential backoff between
// attempts while Lock waits on a backend that cannot queue waiters. Waits are
// never longer than the holder's remaining TTL when the driver reports it.
// Default: 2 ms to 250 ms, or 50 ms to 1 s when the driver also notifies
// waiters of releases.
func WithPolling(minDelay, maxDelay time.Duration) Option {
	return func(c *config) error {
		if minDelay <= 0 || maxDelay < minDelay {
			return fmt.Errorf("%w: polling bounds must satisfy 0 < min <= max, got %v and %v", ErrInvalidOption, minDelay, maxDelay)
		}
		c.pollMin, c.pollMax, c.pollCustom = minDelay, maxDelay, true
		return nil
	}
}

// WithFailFast makes Lock and RLock return the first backend error, as
// TryLock does, instead of waiting through the transient ones (an outage,
// a restart, a paused or unreachable backend: see the list in the package
// documentation under "Outages"). Default: waiting Lock calls ride out
// transient errors, retrying with the polling backoff and reporting each
// error through the Client's logger and metrics, until the lock is granted,
// their context ends, or the Client closes.
func WithFailFast() Option {
	return func(c *config) error {
		c.failFast = true
		return nil
	}
}
