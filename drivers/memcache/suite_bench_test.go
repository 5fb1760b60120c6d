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
	target, done, err := benchtargets.Memcached(server.URL)
	if err != nil {
		b.Fatal(err)
	}
	defer done()
	benchkit.Run(b, target)
}
