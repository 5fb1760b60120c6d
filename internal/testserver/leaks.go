package testserver

import (
	"go.uber.org/goleak"

	"github.com/dlock-go/dlock/conformance/containerfaults"
)

// IgnoreOwnGoroutines returns goleak options that ignore, by function name,
// the goroutines this package and the Docker client it uses leave running
// between tests, and nothing else, for a leak check in a test package that
// uses [Main] or fault hooks:
//   - the Docker client's HTTP keep-alive connections
//     ([containerfaults.IgnoreGoroutines]): each Pause, Stop or Start may
//     open one, which stays idle after it, and a check that started before
//     it would otherwise take it for the driver's;
//   - the signal watch of [Main], which lives as long as the package's tests.
//
// No driver of dlock uses net/http, so ignoring its connection loops hides
// none of theirs.
func IgnoreOwnGoroutines() []goleak.Option {
	return append(containerfaults.IgnoreGoroutines(),
		goleak.IgnoreAnyFunction("github.com/dlock-go/dlock/internal/testserver.runMain.func1"),
		goleak.IgnoreAnyFunction("os/signal.loop"),
		goleak.IgnoreTopFunction("os/signal.signal_recv"),
	)
}
