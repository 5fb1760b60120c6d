package dlock

import (
	"fmt"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// The core's limits; a driver's Validator may narrow them.
const (
	maxKeyLen = 1024
	minTTL    = 10 * time.Millisecond
	maxTTL    = 30 * 24 * time.Hour
)

func checkKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	}
	if len(key) > maxKeyLen {
		return fmt.Errorf("%w: %d bytes, the limit is %d", ErrInvalidKey, len(key), maxKeyLen)
	}
	return nil
}

func checkTTL(ttl time.Duration) error {
	if ttl < minTTL || ttl > maxTTL {
		return fmt.Errorf("%w: %v is outside %v to %v", ErrInvalidTTL, ttl, minTTL, maxTTL)
	}
	return nil
}

// validate checks a key and TTL against the core's rules, then the driver's.
func validate(d driver.Driver, key string, ttl time.Duration) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if err := checkTTL(ttl); err != nil {
		return err
	}
	v, ok := d.(driver.Validator)
	if !ok {
		return nil
	}
	if err := v.ValidateKey(key); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidKey, err)
	}
	if err := v.ValidateTTL(ttl); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidTTL, err)
	}
	return nil
}

// safetyMargin is subtracted from every validity to cover clock drift between
// this process and the backend: 1% of the TTL plus 2 ms, as the Redlock
// analysis suggests.
func safetyMargin(ttl time.Duration) time.Duration {
	return ttl/100 + 2*time.Millisecond
}

// ValidateTTL reports whether the core accepts ttl (10 ms to 30 days),
// with an error wrapping ErrInvalidTTL when it does not. Drivers may accept
// less; Client.Mutex checks that too. For configuration loaders.
func ValidateTTL(ttl time.Duration) error { return checkTTL(ttl) }
