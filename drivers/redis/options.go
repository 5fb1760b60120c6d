package redis

import (
	"fmt"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/driveropt"
)

// DefaultKeyPrefix is the prefix of every Redis name the driver uses, unless
// [WithKeyPrefix] sets another.
const DefaultKeyPrefix = "dlock:"

// Option configures a Driver made by [New]. An Option returns an error
// wrapping dlock.ErrInvalidOption when given a value it does not accept.
type Option func(*options) error

type options struct {
	prefix      string
	nodeTimeout time.Duration // RedLock only; 0: derived from the TTL
	acks        replicaAcks   // Driver only; see WithReplicaAcks
}

func defaultOptions() options {
	return options{prefix: DefaultKeyPrefix}
}

// WithKeyPrefix sets the prefix of every Redis name the Driver uses (the
// lock, its fencing counter and its channel; see "Keys" in the package
// documentation), so that applications sharing a server can keep their locks
// apart. It may be empty, and must not contain '{' or '}', which would change
// the names' Cluster hash tag. Drivers contend for the same lock only when
// they use the same prefix. Default: [DefaultKeyPrefix] ("dlock:").
func WithKeyPrefix(prefix string) Option {
	return driveropt.Checked("redis key prefix", checkPrefix(prefix), func(o *options) { o.prefix = prefix })
}

// WithNodeTimeout sets how long a RedLock waits for one master to answer one
// request, far below the TTL, so that a master that is down or hung costs
// an acquisition little of its validity (the RedLock algorithm's per-node
// timeout). It must be at least 1 ms. Default: a tenth of the lock's TTL,
// between 2 ms and 100 ms, which suits masters with millisecond round
// trips. A reply held up past it counts as that master's failure, and
// without a majority the acquisition fails, so raise it where replies can
// stall longer (a loaded or throttled host, the race detector, a distant
// master), keeping it well below the TTL: each phase of an acquisition may
// take it in full. [Driver] ignores it.
func WithNodeTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d < time.Millisecond {
			return fmt.Errorf("%w: redis node timeout %v is below 1ms", dlock.ErrInvalidOption, d)
		}
		o.nodeTimeout = d
		return nil
	}
}

func checkPrefix(prefix string) error {
	if strings.ContainsAny(prefix, "{}") {
		return fmt.Errorf("%q contains a brace, which would change the Cluster hash tag", prefix)
	}
	return nil
}
