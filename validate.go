package dlock

import (
	"fmt"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// The core's limits; a driver's Capabilities may narrow them.
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

// validate checks a key and TTL against the core's rules, then the ones
// the driver declared.
func validate(caps driver.Capabilities, key string, ttl time.Duration) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if err := checkTTL(ttl); err != nil {
		return err
	}
	if caps.CheckKey != nil {
		if err := caps.CheckKey(key); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidKey, err)
		}
	}
	if (caps.MinTTL > 0 && ttl < caps.MinTTL) || (caps.MaxTTL > 0 && ttl > caps.MaxTTL) {
		lo, hi := max(caps.MinTTL, minTTL), maxTTL
		if caps.MaxTTL > 0 {
			hi = caps.MaxTTL
		}
		err := fmt.Errorf("%w: %v is outside this driver's %v to %v", ErrInvalidTTL, ttl, lo, hi)
		if caps.TTLReason != "" {
			err = fmt.Errorf("%w: %s", err, caps.TTLReason)
		}
		return err
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
