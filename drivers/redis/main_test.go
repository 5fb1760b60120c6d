package redis

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// server is the Redis server of this package's tests: a container that
// TestMain starts for the whole package (testserver.Main), or the one
// DLOCK_TEST_REDIS_URL names.
var server testserver.Target

func TestMain(m *testing.M) { testserver.Main(m, testserver.RedisTarget, &server) }

// ctxFor returns a context bounded for one test step.
var ctxFor = testkit.ContextFor(10 * time.Second)

// newRDB returns a go-redis client of the test server, closed when t ends.
func newRDB(tb testing.TB) *goredis.Client {
	tb.Helper()
	server.Need(tb)
	opt, err := goredis.ParseURL(server.URL)
	if err != nil {
		tb.Fatalf("ParseURL(%q): %v", server.URL, err)
	}
	opt.ContextTimeoutEnabled = true
	opt.MaintNotificationsConfig = maintOff() // as the clients made from URLs (see maintOff)
	rdb := goredis.NewClient(opt)
	tb.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// newTestDriver returns a Driver over rdb, closed when t ends.
func newTestDriver(tb testing.TB, rdb goredis.UniversalClient, opts ...Option) *Driver {
	tb.Helper()
	return testkit.Closing(tb, "New", func() (*Driver, error) { return New(rdb, opts...) })
}

// offlineRDB returns a go-redis client of an address where nothing listens:
// for tests that must not reach a server (go-redis connects lazily).
func offlineRDB() *goredis.Client {
	return goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: time.Second})
}

// needOwnContainers skips tb unless the package's server is a container
// of the tests' own: tests that start more servers (a Cluster, RedLock's
// masters) do not against an external server.
func needOwnContainers(tb testing.TB) {
	tb.Helper()
	server.Need(tb)
	if !server.Faults() {
		tb.Skip("starts containers of its own; the package runs against an external server")
	}
}

// ownCluster starts a Redis Cluster of n masters for tb only (see
// needOwnContainers), removed when tb ends.
func ownCluster(tb testing.TB, n int) *testserver.RedisCluster {
	tb.Helper()
	needOwnContainers(tb)
	return testserver.Own(tb, testserver.StartTimeout, func(ctx context.Context) (*testserver.RedisCluster, error) {
		return testserver.StartRedisCluster(ctx, n)
	})
}

// ownGroup starts n independent Redis servers, RedLock's masters, for tb
// only (see needOwnContainers), removed when tb ends.
func ownGroup(tb testing.TB, n int) *testserver.RedisGroup {
	tb.Helper()
	needOwnContainers(tb)
	return testserver.Own(tb, testserver.StartTimeout, func(ctx context.Context) (*testserver.RedisGroup, error) {
		return testserver.StartRedisGroup(ctx, n)
	})
}
