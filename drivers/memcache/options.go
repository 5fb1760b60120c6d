package memcache

import (
	"errors"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/dlock-go/dlock/internal/driveropt"
)

// DefaultKeyPrefix starts the name of every memcached item the driver uses,
// unless [WithKeyPrefix] sets another.
const DefaultKeyPrefix = "dlock:"

// Option configures a Driver made by [New]. An Option returns an error
// wrapping dlock.ErrInvalidOption when given a value it does not accept.
type Option func(*options) error

type options struct {
	prefix   string
	selector gomemcache.ServerSelector
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

// WithSelector tells a Driver made by [New] the server selector its client
// was made with (gomemcache.NewFromSelector; a gomemcache.ServerList for
// gomemcache.New's servers). gomemcache does not reveal it, and without it
// the Driver cannot tell which server holds an item. With it, the Driver
// renews many held locks in two pipelined round trips per server instead of
// two each (memcached's meta commands, 1.6 and later, on connections of its
// own dialled with the client's DialContext and bounded by its Timeout):
// Capabilities then declare a BatchExtender. The selector must pick the
// same servers as the client's.
func WithSelector(sel gomemcache.ServerSelector) Option {
	var err error
	if sel == nil {
		err = errors.New("nil selector")
	}
	return driveropt.Checked("memcached server selector", err, func(o *options) { o.selector = sel })
}
