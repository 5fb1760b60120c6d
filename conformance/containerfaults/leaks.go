package containerfaults

import "go.uber.org/goleak"

// IgnoreGoroutines returns goleak options that ignore, by function name, the
// goroutines a [Container]'s Docker client leaves running between tests:
// net/http's read and write loops of its idle keep-alive connections. Each
// Pause, Resume, Stop or Start may open one, and a leak check that began
// before it would take it for the driver's. A driver that itself uses
// net/http should check its own connections some other way.
func IgnoreGoroutines() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
	}
}
