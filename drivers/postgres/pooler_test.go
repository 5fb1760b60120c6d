package postgres

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// bouncer starts PgBouncer in poolMode in front of a PostgreSQL server, in a
// container of its own (or, for transaction mode, uses
// DLOCK_TEST_PGBOUNCER_URL).
func bouncer(t *testing.T, poolMode string) testserver.Target {
	t.Helper()
	server.Need(t)
	if _, set := os.LookupEnv(testserver.EnvPgBouncerURL); !server.Faults() && !(set && poolMode == "transaction") {
		t.Skip("external PostgreSQL server: no PgBouncer container (set " + testserver.EnvPgBouncerURL + " for the transaction-mode test)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), testserver.StartTimeout)
	defer cancel()
	tgt, err := testserver.PgBouncerTarget(ctx, poolMode)
	if err != nil {
		t.Fatalf("PgBouncer: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := tgt.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	return tgt
}

// Behind PgBouncer in transaction mode, server sessions are lent per
// transaction: the driver must refuse rather than hand out locks that stay
// on a session another client then uses. A second connection reaches the
// server session the first one set up (PgBouncer reuses its idle server
// connection), and is refused.
func TestRefusesTransactionPooler(t *testing.T) {
	pgb := bouncer(t, "transaction")
	ctx := ctxFor(t)

	// dlock.Open connects once; the connection's BackendKeyData shows a
	// pooler in between, so the driver checks with a second connection,
	// which PgBouncer gives the server session the first one set up (it
	// lends it again as soon as a statement's transaction ends): refused.
	_, err := dlock.Open(ctx, pgb.URL)
	if !errors.Is(err, ErrSessionChanged) {
		t.Fatalf("Open through PgBouncer: got %v, want ErrSessionChanged", err)
	}
	t.Logf("Open: %v", err)

	// A Driver made without connecting (NewFromConfig) is refused at its
	// first acquisition, for the same reason, or at the latest when it
	// needs a second connection. Locks may be granted before that, but
	// never two on one server session unnoticed.
	cfg, err := pgconn.ParseConfig(pgb.URL)
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewFromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var held []driver.Lease
	refused := false
	for i := range 3 {
		l, err := d.Acquire(ctx, testkit.Request(testkit.Key(t), 5*time.Second))
		switch {
		case err == nil:
			held = append(held, l)
			t.Logf("lock %d: granted", i)
		case errors.Is(err, ErrSessionChanged):
			refused = true
			t.Logf("lock %d: %v", i, err)
		default:
			t.Errorf("Acquire through PgBouncer: got %v, want a lock or ErrSessionChanged", err)
		}
	}
	for _, l := range held {
		_ = l.Release(ctx)
	}
	if !refused {
		t.Errorf("%d locks granted at once through a transaction-mode pooler and none refused, want ErrSessionChanged", len(held))
	}
}

// Behind PgBouncer in session mode, each client connection has a server
// session of its own for as long as it lasts, and PgBouncer clears it
// (DISCARD ALL, which also ends advisory locks) before lending it to the
// next: that works, and the driver's pooler check lets it through.
func TestSessionPoolerWorks(t *testing.T) {
	pgb := bouncer(t, "session")
	ctx := ctxFor(t)
	d1, err := open(ctx, testkit.URL(t, pgb.URL))
	if err != nil {
		t.Fatalf("Open through a session-mode PgBouncer: %v", err)
	}
	defer d1.Close()
	d2, err := open(ctx, testkit.URL(t, pgb.URL))
	if err != nil {
		t.Fatalf("second Open through a session-mode PgBouncer: %v", err)
	}
	defer d2.Close()
	key := testkit.Key(t)
	l1, err := d1.Acquire(ctx, testkit.Request(key, 5*time.Second))
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if _, err := d2.Acquire(ctx, testkit.Request(key, time.Second)); !errors.Is(err, driver.ErrLocked) {
		t.Fatalf("Acquire by another client: got %v, want ErrLocked", err)
	}
	if err := l1.Extend(ctx, 5*time.Second); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if err := l1.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	// A client that closes hands its server session back, cleared.
	if err := d1.Close(); err != nil {
		t.Fatal(err)
	}
	d3, err := open(ctx, testkit.URL(t, pgb.URL))
	if err != nil {
		t.Fatalf("Open after a client left: %v", err)
	}
	defer d3.Close()
	l3, err := d3.Acquire(ctx, testkit.Request(key, time.Second))
	if err != nil {
		t.Fatalf("Acquire after a client left: %v", err)
	}
	_ = l3.Release(ctx)
}
