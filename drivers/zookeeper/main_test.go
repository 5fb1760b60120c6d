package zookeeper

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/liblog"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// server is the ZooKeeper server of this package's tests: a container that
// TestMain starts for the whole package (testserver.Main), or the one
// DLOCK_TEST_ZOOKEEPER_URL names.
var server testserver.Target

func TestMain(m *testing.M) { testserver.Main(m, testserver.ZooKeeperTarget, &server) }

// ctxFor returns a context bounded for one test step.
var ctxFor = testkit.ContextFor(30 * time.Second)

// testSession is the session timeout of the tests' Drivers: short, so that
// expiry cases are quick, and long enough for a loaded machine running
// -race not to lose sessions by accident.
const testSession = 2 * time.Second

// testURL returns the server's URL with the tests' session timeout and a base
// path of the test's own, so that no test sees another's nodes.
func testURL(tb testing.TB, base string) string {
	tb.Helper()
	server.Need(tb)
	u, err := url.Parse(server.URL)
	if err != nil {
		tb.Fatalf("bad server URL %q: %v", server.URL, err)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/dlock-test"
	}
	u.Path += base
	q := u.Query()
	q.Set(sessionTTLParam, testSession.String())
	u.RawQuery = q.Encode()
	return u.String()
}

// dial opens a Driver on url, closed when tb ends.
func dial(tb testing.TB, rawURL string) *Driver {
	tb.Helper()
	u := testkit.URL(tb, rawURL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return testkit.Closing(tb, "open "+rawURL, func() (driver.Driver, error) { return open(ctx, u) }).(*Driver)
}

// rawConn returns a plain client connection to the test server (the first of
// its hosts), closed when tb ends, for looking at and tampering with nodes.
func rawConn(tb testing.TB) *zk.Conn {
	tb.Helper()
	servers, _, err := parseURL(testkit.URL(tb, testURL(tb, "")))
	if err != nil {
		tb.Fatal(err)
	}
	conn, _, err := zk.Connect(servers, testSession, zk.WithLogger(liblog.Printf("go-zookeeper")))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(conn.Close)
	deadline := time.Now().Add(30 * time.Second)
	for conn.State() != zk.StateHasSession {
		if time.Now().After(deadline) {
			tb.Fatal("no session with the test server")
		}
		time.Sleep(5 * time.Millisecond) // polling the library's state: it has no wait
	}
	return conn
}
