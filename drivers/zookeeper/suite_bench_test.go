package zookeeper

import (
	"net/url"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/benchkit"
	"github.com/dlock-go/dlock/internal/benchtargets"
)

// BenchmarkSuite runs the standard benchmark suite (internal/benchkit)
// against the test server, with the session timeout dlock bench uses.
//
//	go test -run '^$' -bench Suite -benchtime 1x ./drivers/zookeeper/
func BenchmarkSuite(b *testing.B) {
	u, err := url.Parse(testURL(b, testBase()))
	if err != nil {
		b.Fatal(err)
	}
	q := u.Query()
	q.Set(sessionTimeoutParam, "4s")
	u.RawQuery = q.Encode()
	t := benchtargets.ZooKeeper(u.String(), 4*time.Second)
	// Renewal is batched (one multi per 1,000 checks), so the held-locks
	// measurement holds as many locks as on every other backend, and its
	// heap per lock compares with theirs.
	t.MaxHeld = 0
	benchkit.Run(b, t)
}
