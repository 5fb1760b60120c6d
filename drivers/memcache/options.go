package memcache

import "github.com/dlock-go/dlock/internal/driveropt"

// DefaultKeyPrefix starts the name of every memcached item the driver uses,
// unless [WithKeyPrefix] sets another.
const DefaultKeyPrefix = "dlock:"

// Option configures a Driver made by [New]. An Option returns an error
// wrapping dlock.ErrInvalidOption when given a value it does not accept.
type Option func(*options) error

type options struct {
	prefix string
}

func defaultOptions() options {
	return options{prefix: DefaultKeyPrefix}
}

// WithKeyPrefix sets the prefix of every memcached item name the Driver uses
// (see "Keys" in the package documentation), so that applications sharing a
// server keep their locks apart. It may be empty; otherwise it must be at
// most 64 bytes of printable ASCII without spaces, as memcached keys are.
// Drivers contend for the same lock only when they use the same prefix.
// Default: [DefaultKeyPrefix] ("dlock:").
func WithKeyPrefix(prefix string) Option {
	return driveropt.Checked("memcached key prefix", checkPrefix(prefix), func(o *options) { o.prefix = prefix })
}
