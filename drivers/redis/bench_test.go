package redis

import (
	"testing"

	"github.com/dlock-go/dlock/internal/benchkit"
	"github.com/dlock-go/dlock/internal/benchtargets"
)

// BenchmarkSuite runs the standard benchmark suite (internal/benchkit)
// against the test server, comparing with raw SET NX PX + DEL in the same
// run. Targets: uncontended within 1.2x raw; handoff p50 within 0.25 ms; at
// most 4 requests per critical section with 16 waiters in one process.
//
//	make bench   (or: go test -run '^$' -bench Suite -benchtime 1x ./drivers/redis/)
func BenchmarkSuite(b *testing.B) {
	server.Need(b)
	target, closeRaw, err := benchtargets.Redis(server.URL)
	if err != nil {
		b.Fatal(err)
	}
	defer closeRaw()
	benchkit.Run(b, target)
}
