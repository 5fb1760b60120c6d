package memcache

import (
	"testing"

	"github.com/dlock-go/dlock/internal/benchkit"
	"github.com/dlock-go/dlock/internal/benchtargets"
)

// BenchmarkSuite runs the standard benchmark suite (internal/benchkit)
// against the test server, comparing with raw add + delete in the same run.
//
//	make bench   (or: go test -run '^$' -bench Suite -benchtime 1x ./drivers/memcache/)
func BenchmarkSuite(b *testing.B) {
	server.Need(b)
	benchkit.RunOn(b, func() (benchkit.Target, func(), error) { return benchtargets.Memcached(server.URL) })
}
