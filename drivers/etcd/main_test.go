package etcd

import (
	"context"
	"net/url"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// server is the etcd cluster of this package's tests: a container that
// TestMain starts for the whole package (testserver.Main), or the one
// DLOCK_TEST_ETCD_URL names.
var server testserver.Target

func TestMain(m *testing.M) { testserver.Main(m, testserver.EtcdTarget, &server) }

// ctxFor returns a context bounded for one test step.
var ctxFor = testkit.ContextFor(20 * time.Second)

// testTTL is the session TTL of the tests' drivers, and the TTL of their
// locks: the shortest etcd lease the test server grants.
const testTTL = time.Second

// endpoints returns the client endpoints of the test server's URL.
func endpoints(tb testing.TB) []string {
	tb.Helper()
	u, err := url.Parse(server.URL)
	if err != nil {
		tb.Fatalf("parse %q: %v", server.URL, err)
	}
	cfg, _, err := parseURL(u)
	if err != nil {
		tb.Fatalf("parseURL(%q): %v", server.URL, err)
	}
	return cfg.Endpoints
}

// newCli returns a clientv3 client of the test server, closed when tb ends.
func newCli(tb testing.TB) *clientv3.Client {
	tb.Helper()
	server.Need(tb)
	return newCliAt(tb, endpoints(tb)...)
}

// newCliAt returns a clientv3 client of endpoints, closed when tb ends.
func newCliAt(tb testing.TB, endpoints ...string) *clientv3.Client {
	tb.Helper()
	return testkit.Closing(tb, "clientv3.New", func() (*clientv3.Client, error) {
		return clientv3.New(clientv3.Config{Endpoints: endpoints, Logger: zap.NewNop()})
	})
}

// testURL returns the test server's URL with the session TTL set to ttl.
func testURL(ttl time.Duration) string {
	u, _ := url.Parse(server.URL)
	q := u.Query()
	q.Set(sessionTTLParam, ttl.String())
	u.RawQuery = q.Encode()
	return u.String()
}

// openTest opens a Driver the way dlock.Open does, with session TTL ttl.
func openTest(ctx context.Context, ttl time.Duration) (*Driver, error) {
	u, err := url.Parse(testURL(ttl))
	if err != nil {
		return nil, err
	}
	d, err := open(ctx, u)
	if err != nil {
		return nil, err
	}
	return d.(*Driver), nil
}

// newTestDriver returns a Driver over cli, closed when tb ends.
func newTestDriver(tb testing.TB, cli *clientv3.Client, opts ...Option) *Driver {
	tb.Helper()
	opts = append([]Option{WithSessionTTL(testTTL)}, opts...)
	return testkit.Closing(tb, "New", func() (*Driver, error) { return New(cli, opts...) })
}
