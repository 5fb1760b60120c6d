package memcache

import (
	"context"
	"crypto/rand"
	"net/url"
	"strings"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/dlock-go/dlock/internal/testserver"
)

// server is the memcached server of this package's tests: one container
// started by TestMain, or the server DLOCK_TEST_MEMCACHED_URL names.
var server testserver.Target

// TestMain starts one memcached container for the whole package (or uses
// DLOCK_TEST_MEMCACHED_URL) and terminates it after the tests. Without a
// Docker engine the server tests skip, saying why, unless
// DLOCK_REQUIRE_CONTAINERS=1 makes that a failure.
func TestMain(m *testing.M) { testserver.Main(m, testserver.MemcachedTarget, &server) }

// serverAddrs returns the host:port list of a memcache:// URL.
func serverAddrs(tb testing.TB, rawURL string) []string {
	tb.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		tb.Fatalf("url.Parse(%q): %v", rawURL, err)
	}
	cfg, err := parseURL(u)
	if err != nil {
		tb.Fatalf("parseURL(%q): %v", rawURL, err)
	}
	return cfg.servers
}

// newMC returns a gomemcache client of the test server, closed when tb ends.
func newMC(tb testing.TB) *gomemcache.Client {
	tb.Helper()
	server.Need(tb)
	return newMCAt(tb, server.URL)
}

// newMCAt returns a gomemcache client of the servers of rawURL, closed when
// tb ends.
func newMCAt(tb testing.TB, rawURL string) *gomemcache.Client {
	tb.Helper()
	mc := gomemcache.New(serverAddrs(tb, rawURL)...)
	mc.Timeout = 2 * time.Second // generous: the machine is shared
	mc.MaxIdleConns = 4
	tb.Cleanup(func() { _ = mc.Close() })
	return mc
}

// newTestDriver returns a Driver over mc, closed when tb ends.
func newTestDriver(tb testing.TB, mc *gomemcache.Client, opts ...Option) *Driver {
	tb.Helper()
	d, err := New(mc, opts...)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	tb.Cleanup(func() { _ = d.Close() })
	return d
}

// testKey returns a key no other test (or earlier run against an external
// server) uses.
func testKey(tb testing.TB) string {
	return "test/" + tb.Name() + "/" + rand.Text()[:8]
}

// newID returns a request ID shaped like the core's.
func newID() string {
	return strings.ToLower(rand.Text()[:26])
}

// ctxFor returns a context bounded for one test step.
func ctxFor(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	tb.Cleanup(cancel)
	return ctx
}
