package testkit

import (
	"testing"

	"go.uber.org/goleak"
)

// NoLeaks fails tb if goroutines that started during it outlive it, with
// opts ignoring more (such as testserver.IgnoreOwnGoroutines). Call it
// first, so that its check runs after every other cleanup.
func NoLeaks(tb testing.TB, opts ...goleak.Option) {
	tb.Helper()
	opts = append(opts, goleak.IgnoreCurrent())
	tb.Cleanup(func() { goleak.VerifyNone(tb, opts...) })
}
