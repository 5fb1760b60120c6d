package memcache

import (
	"net/url"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// server is the memcached server of this package's tests: a container that
// TestMain starts for the whole package (testserver.Main), or the one
// DLOCK_TEST_MEMCACHED_URL names.
var server testserver.Target

func TestMain(m *testing.M) { testserver.Main(m, testserver.MemcachedTarget, &server) }

// ctxFor returns a context bounded for one test step.
var ctxFor = testkit.ContextFor(10 * time.Second)

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
	mc, _ := newMCSelAt(tb, rawURL)
	return mc
}

// newMCSelAt is newMCAt, with the selector the client was made with (for
// WithSelector).
func newMCSelAt(tb testing.TB, rawURL string) (*gomemcache.Client, gomemcache.ServerSelector) {
	tb.Helper()
	var sel gomemcache.ServerList
	if err := sel.SetServers(serverAddrs(tb, rawURL)...); err != nil {
		tb.Fatal(err)
	}
	mc := gomemcache.NewFromSelector(&sel)
	mc.Timeout = 2 * time.Second // generous: the machine is shared
	mc.MaxIdleConns = 4
	tb.Cleanup(func() { _ = mc.Close() })
	return mc, &sel
}

// newTestDriver returns a Driver over mc, closed when tb ends.
func newTestDriver(tb testing.TB, mc *gomemcache.Client, opts ...Option) *Driver {
	tb.Helper()
	return testkit.Closing(tb, "New", func() (*Driver, error) { return New(mc, opts...) })
}
