package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// server is the PostgreSQL server of this package's tests: a container that
// TestMain starts for the whole package (testserver.Main), or the one
// DLOCK_TEST_POSTGRES_URL names.
var server testserver.Target

func TestMain(m *testing.M) { testserver.Main(m, testserver.PostgresTarget, &server) }

// ctxFor returns a context bounded for one test step.
var ctxFor = testkit.ContextFor(20 * time.Second)

// newTestDriver returns a Driver over the test server that dials its own
// connections, closed when tb ends.
func newTestDriver(tb testing.TB, opts ...Option) *Driver {
	tb.Helper()
	server.Need(tb)
	cfg, err := pgconn.ParseConfig(server.URL)
	if err != nil {
		tb.Fatalf("ParseConfig: %v", err)
	}
	return testkit.Closing(tb, "NewFromConfig", func() (*Driver, error) { return NewFromConfig(cfg, opts...) })
}

// rawConn returns a plain connection to the test server, closed when tb
// ends: a stranger to the driver.
func rawConn(tb testing.TB) *pgconn.PgConn {
	tb.Helper()
	server.Need(tb)
	c, err := pgconn.Connect(ctxFor(tb), server.URL)
	if err != nil {
		tb.Fatalf("connect: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c
}

// noLeaks fails tb if goroutines it started outlive it: the Driver's
// watches, dials and cancel requests must all end with the Drivers closed in
// tb's cleanups. Call it first, so that its check runs after every other
// cleanup. The goroutines of the Docker client that the fault hooks use are
// not the driver's (see testserver.IgnoreOwnGoroutines).
func noLeaks(tb testing.TB) { testkit.NoLeaks(tb, testserver.IgnoreOwnGoroutines()...) }
