package zookeeper

import (
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/benchkit"
	"github.com/dlock-go/dlock/internal/benchtargets"
	"github.com/dlock-go/dlock/internal/testkit"
)

// BenchmarkSuite runs the standard benchmark suite (internal/benchkit)
// against the test server, with the session timeout dlock bench uses,
// comparing with a raw create+delete in the same run.
//
//	go test -run '^$' -bench Suite -benchtime 1x ./drivers/zookeeper/
func BenchmarkSuite(b *testing.B) {
	u := testkit.WithQuery(b, testURL(b, testBase()), sessionTTLParam, "4s")
	benchkit.RunOn(b, func() (benchkit.Target, func(), error) { return benchtargets.ZooKeeperTarget(u, 4*time.Second) })
}
