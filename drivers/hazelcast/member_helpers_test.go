package hazelcast

import (
	"context"
	"crypto/rand"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hazelcast/hazelcast-go-client"
)

// Helpers of the tests that need a real cluster (server.Need skips them
// without one).

// testMapName returns a lock map name no other test run uses, so that runs
// against an external cluster never meet each other's locks.
func testMapName() string {
	return "dlock-test-" + strings.ToLower(rand.Text()[:8])
}

// memberURL returns the test cluster's URL with the lock map mapName.
func memberURL(tb testing.TB, mapName string) *url.URL {
	tb.Helper()
	server.Need(tb)
	u, err := url.Parse(server.URL)
	if err != nil {
		tb.Fatalf("test cluster URL %q: %v", server.URL, err)
	}
	q := u.Query()
	q.Set(paramMap, mapName)
	u.RawQuery = q.Encode()
	return u
}

// rawClient returns a plain Hazelcast client of the test cluster, shut down
// when tb ends: a stranger to the driver, or the caller's client for New.
func rawClient(tb testing.TB) *hazelcast.Client {
	tb.Helper()
	cfg, _, err := parseURL(memberURL(tb, DefaultMap))
	if err != nil {
		tb.Fatalf("parseURL: %v", err)
	}
	c, err := hazelcast.StartNewClientWithConfig(ctxFor(tb), cfg)
	if err != nil {
		tb.Fatalf("connect to the test cluster: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Shutdown(ctx)
	})
	return c
}

// openMember returns a Driver made from the test cluster's URL with the
// lock map mapName, closed when tb ends.
func openMember(tb testing.TB, mapName string) *Driver {
	tb.Helper()
	d, err := open(ctxFor(tb), memberURL(tb, mapName))
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(func() { _ = d.Close() })
	return d.(*Driver)
}
