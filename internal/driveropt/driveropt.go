// Package driveropt applies a driver's functional options. Every driver's
// Option is a func(*options) error over an options struct of its own; they
// share how a list of them is applied.
package driveropt

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
