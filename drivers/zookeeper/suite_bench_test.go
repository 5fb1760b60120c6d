package zookeeper

import (
	"net/url"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/benchkit"
	"github.com/dlock-go/dlock/internal/benchtargets"
)

// BenchmarkSuite runs the standard benchmark suite (internal/benchkit)
// against the test server, with the session timeout dlock bench uses,
// comparing with a raw create+delete in the same run.
//
//	go test -run '^$' -bench Suite -benchtime 1x ./drivers/zookeeper/
func BenchmarkSuite(b *testing.B) {
	u, err := url.Parse(testURL(b, testBase()))
	if err != nil {
		b.Fatal(err)
	}
	q := u.Query()
	q.Set(sessionTTLParam, "4s")
	u.RawQuery = q.Encode()
	t, done, err := benchtargets.ZooKeeperTarget(u.String(), 4*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer done()
	benchkit.Run(b, t)
}
