package dlock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/drivers/memory"
)

// limitedDriver declares TTL limits and a key rule of its own over the
// memory driver.
type limitedDriver struct {
	driver.Driver
	caps driver.Capabilities
}

func (d limitedDriver) Capabilities() driver.Capabilities { return d.caps }

// The TTL limits and the key rule a driver declares are checked by the core
// before any request, with its reasons in the errors.
func TestDeclaredLimits(t *testing.T) {
	errBadKey := errors.New("no colons, please")
	d := limitedDriver{Driver: memory.New(memory.NewBackend()), caps: driver.Capabilities{
		MinTTL:    time.Second,
		MaxTTL:    time.Hour,
		TTLReason: "the backend counts in seconds",
		CheckKey: func(key string) error {
			if strings.Contains(key, ":") {
				return errBadKey
			}
			return nil
		},
	}}
	c, err := dlock.New(d, dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(t.Context())
	for _, ttl := range []time.Duration{time.Second - time.Nanosecond, 20 * time.Millisecond, time.Hour + time.Nanosecond, 24 * time.Hour} {
		_, err := c.Mutex("k", dlock.WithTTL(ttl))
		if !errors.Is(err, dlock.ErrInvalidTTL) || !strings.Contains(err.Error(), "the backend counts in seconds") {
			t.Errorf("TTL %v: got %v, want ErrInvalidTTL with the driver's reason", ttl, err)
		}
	}
	for _, ttl := range []time.Duration{time.Second, time.Minute, time.Hour} {
		if _, err := c.Mutex("k", dlock.WithTTL(ttl)); err != nil {
			t.Errorf("TTL %v, inside the driver's limits: %v", ttl, err)
		}
	}
	if _, err := c.Mutex("a:b"); !errors.Is(err, dlock.ErrInvalidKey) || !errors.Is(err, errBadKey) {
		t.Errorf("key the driver refuses: got %v, want ErrInvalidKey wrapping the driver's reason", err)
	}
	// The core's own limits still apply below a driver's.
	c2, err := dlock.New(limitedDriver{Driver: d.Driver, caps: driver.Capabilities{MaxTTL: 365 * 24 * time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close(t.Context())
	if _, err := c2.Mutex("k", dlock.WithTTL(31*24*time.Hour)); !errors.Is(err, dlock.ErrInvalidTTL) {
		t.Errorf("TTL beyond the core's 30 days: got %v, want ErrInvalidTTL", err)
	}
}

// Inconsistent capabilities are refused when the Client is made.
func TestInconsistentCapabilitiesRefused(t *testing.T) {
	inner := memory.New(memory.NewBackend(), memory.WithoutBlocking())
	for name, caps := range map[string]driver.Capabilities{
		"BlockingTransferer": {Blocking: true, Transferer: inner.Capabilities().Transferer},
		"BlockingTokenBlock": {Blocking: true, TokenBlock: 8},
		"EmptyTTLRange":      {MinTTL: time.Hour, MaxTTL: time.Minute},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := dlock.New(limitedDriver{Driver: inner, caps: caps}); !errors.Is(err, dlock.ErrInvalidOption) {
				t.Errorf("got %v, want ErrInvalidOption", err)
			}
		})
	}
	// A Blocking driver with a TokenBlock of 1 (no block) is fine.
	c, err := dlock.New(limitedDriver{Driver: memory.New(memory.NewBackend()), caps: driver.Capabilities{Blocking: true, TokenBlock: 1}})
	if err != nil {
		t.Fatalf("TokenBlock 1 on a Blocking driver: %v", err)
	}
	_ = c.Close(t.Context())
}
