package redis

import (
	"fmt"
	"strings"

	"github.com/dlock-go/dlock"
)

// DefaultKeyPrefix is the prefix of every Redis name the driver uses, unless
// [WithKeyPrefix] sets another.
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

// WithKeyPrefix sets the prefix of every Redis name the Driver uses (the
// lock, its fencing counter and its channel; see "Keys" in the package
// documentation), so that applications sharing a server can keep their locks
// apart. It may be empty, and must not contain '{' or '}', which would change
// the names' Cluster hash tag. Drivers contend for the same lock only when
// they use the same prefix. Default: [DefaultKeyPrefix] ("dlock:").
func WithKeyPrefix(prefix string) Option {
	return func(o *options) error {
		if err := checkPrefix(prefix); err != nil {
			return fmt.Errorf("%w: redis key prefix: %w", dlock.ErrInvalidOption, err)
		}
		o.prefix = prefix
		return nil
	}
}

func checkPrefix(prefix string) error {
	if strings.ContainsAny(prefix, "{}") {
		return fmt.Errorf("%q contains a brace, which would change the Cluster hash tag", prefix)
	}
	return nil
}
