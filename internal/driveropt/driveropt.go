// Package driveropt applies a driver's functional options. Every driver's
// Option is a func(*options) error over an options struct of its own; they
// share how a list of them is applied, and how an option whose value a
// check refuses reports it.
package driveropt

import (
	"fmt"

	"github.com/dlock-go/dlock"
)

// Apply calls every option of opts on o in order, skipping nil ones (so
// that a caller may build a list with optional entries), and stops at the
// first error, which it returns as is: the drivers' options wrap
// dlock.ErrInvalidOption themselves.
func Apply[O any, F ~func(*O) error](o *O, opts []F) error {
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(o); err != nil {
			return err
		}
	}
	return nil
}

// Checked returns the option that does set, or, when err (a check of the
// option's value) is not nil, fails with an error wrapping both
// dlock.ErrInvalidOption and err: "invalid option: what: err". The check
// runs when the option is made rather than when it is applied, which is
// the same for the drivers' checks: they look at the value alone.
func Checked[O any](what string, err error, set func(*O)) func(*O) error {
	return func(o *O) error {
		if err != nil {
			return fmt.Errorf("%w: %s: %w", dlock.ErrInvalidOption, what, err)
		}
		set(o)
		return nil
	}
}
