package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
)

// dlock's own locks are not another application's: a held lock of a dlock
// client leaves the report clean.
func TestDoctorClean(t *testing.T) {
	server.Need(t)
	ctx := ctxFor(t)
	client, err := dlock.Open(ctx, server.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close(context.Background()) })
	m, err := client.Mutex(testkit.Key(t))
	if err != nil {
		t.Fatal(err)
	}
	lease, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lease.Unlock(context.Background()) })

	r := testkit.Diagnose(t, server.URL, 0)
	testkit.ExpectFindings(t, r)
	if len(r.Checks) != 3 {
		t.Errorf("checks run: %v, want pooler, idle timeout and advisory locks", r.Checks)
	}
}

func TestDoctorFindsForeignAdvisoryLocks(t *testing.T) {
	server.Need(t)
	ctx := ctxFor(t)
	other, err := pgconn.Connect(ctx, testkit.WithQuery(t, server.URL, "application_name", "billing"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = other.Close(ctx)
	})
	if _, err := other.Exec(ctx, "SELECT pg_advisory_lock(42)").ReadAll(); err != nil {
		t.Fatal(err)
	}
	testkit.ExpectFindings(t, testkit.Diagnose(t, server.URL, 0), checkAdvisory)
}

func TestDoctorFindsTransactionPooler(t *testing.T) {
	testkit.ExpectFindings(t, testkit.Diagnose(t, bouncer(t, "transaction").URL, 0), checkPooler)
}

func TestDoctorAcceptsSessionPooler(t *testing.T) {
	testkit.ExpectFindings(t, testkit.Diagnose(t, bouncer(t, "session").URL, 0))
}

// The images run PostgreSQL 15: a server without idle_session_timeout is
// judged from its version and keep-alive settings.
func TestIdleProblem(t *testing.T) {
	for _, c := range []struct {
		num                   int
		idle, interval, count string
		ttl                   time.Duration
		bad                   bool
	}{
		{150004, "0", "0", "0", 15 * time.Second, false},
		{140000, "0", "0", "0", time.Second, false},
		{130011, "0", "0", "0", 15 * time.Second, true},
		{130011, "5", "1", "3", 15 * time.Second, false},
		{130011, "5", "1", "3", 5 * time.Second, true},
	} {
		if got := idleProblem(c.num, c.idle, c.interval, c.count, c.ttl); (got != "") != c.bad {
			t.Errorf("idleProblem(%d, %s, %s, %s, %v) = %q", c.num, c.idle, c.interval, c.count, c.ttl, got)
		}
	}
}
