package etcd

import (
	"fmt"
	"strings"
	"time"

	"github.com/dlock-go/dlock/internal/driveropt"
)

// DefaultKeyPrefix is the prefix of every etcd name the driver uses, unless
// [WithKeyPrefix] or the URL's path says otherwise.
const DefaultKeyPrefix = "dlock"

// DefaultSessionTTL is the TTL of a Driver's session lease unless
// [WithSessionTTL] or the URL's session_ttl parameter says otherwise. It equals
// dlock.DefaultTTL, so that mutexes with the default TTL are accepted.
const DefaultSessionTTL = 15 * time.Second

// maxSessionTTL is etcd's own limit on lease TTLs (9e9 s), rounded down to
// something a time.Duration holds with room to spare.
const maxSessionTTL = 100 * 365 * 24 * time.Hour

// Option configures a Driver made by [New]. An Option returns an error
// wrapping dlock.ErrInvalidOption when given a value it does not accept.
type Option func(*options) error

type options struct {
	prefix string
	ttl    time.Duration
}

func defaultOptions() options {
	return options{prefix: DefaultKeyPrefix, ttl: DefaultSessionTTL}
}

// WithKeyPrefix sets the prefix of every etcd name the Driver uses (see
// "Keys" in the package documentation), so that applications sharing a
// cluster can keep their locks apart; a URL gives it as its path. Drivers contend for the same lock only when they
// use the same prefix. It must not end with '/' (the driver adds one); it
// may be empty. Default: [DefaultKeyPrefix] ("dlock").
func WithKeyPrefix(prefix string) Option {
	return driveropt.Checked("etcd prefix", checkPrefix(prefix), func(o *options) { o.prefix = prefix })
}

// WithSessionTTL sets the TTL of the Driver's session lease: how long etcd
// keeps the locks of a client that stopped sending keepalives (a crashed or
// partitioned process). It must be a whole number of seconds (etcd lease
// TTLs are), at least 1 s; a server may grant more than asked (its minimum
// is 1.5 election timeouts, rounded up). Mutexes of the Driver may not have
// a longer TTL (see "Capabilities"). Default: [DefaultSessionTTL] (15 s).
func WithSessionTTL(ttl time.Duration) Option {
	return driveropt.Checked("etcd session TTL", checkSessionTTL(ttl), func(o *options) { o.ttl = ttl })
}

func checkPrefix(prefix string) error {
	if strings.HasSuffix(prefix, "/") {
		return fmt.Errorf("%q ends with '/', which the driver adds itself", prefix)
	}
	return nil
}

func checkSessionTTL(ttl time.Duration) error {
	switch {
	case ttl < time.Second || ttl > maxSessionTTL:
		return fmt.Errorf("%v is outside 1s to %v", ttl, maxSessionTTL)
	case ttl%time.Second != 0:
		return fmt.Errorf("%v is not a whole number of seconds, as etcd lease TTLs are", ttl)
	}
	return nil
}
