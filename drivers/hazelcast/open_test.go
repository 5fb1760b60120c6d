package hazelcast

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// Open of a URL where no member listens, or where one accepts connections
// and never answers, fails within its connect timeout instead of retrying
// forever.
//
// hazelcast-go-client v1.6.0 leaves one goroutine behind (schemaInvoker)
// when a client fails to start, and hands back nothing to shut down: a leak
// of the library, one goroutine per failed Open, that the check tolerates
// by name, beside the test harness's own goroutines (its Docker client).
func TestOpenFailsFast(t *testing.T) {
	testkit.OpenFailsFast(t, func(addr string) string { return "hazelcast://" + addr + "/dev" },
		append(testserver.IgnoreOwnGoroutines(),
			goleak.IgnoreTopFunction("github.com/hazelcast/hazelcast-go-client.(*Client).schemaInvoker"))...)
}
