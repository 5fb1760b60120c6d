package postgres

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dlock-go/dlock/conformance"
	"github.com/dlock-go/dlock/conformance/containerfaults"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

// holders returns the backend processes that hold the advisory key id.
func holders(ctx context.Context, c *pgconn.PgConn, id int64) ([]string, error) {
	sql := fmt.Sprintf(`SELECT pid::text FROM pg_catalog.pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND granted
  AND classid::int8 = (%d::int8 >> 32) & 4294967295 AND objid::int8 = %d::int8 & 4294967295`, id, id)
	results, err := c.Exec(ctx, sql).ReadAll()
	if err != nil {
		return nil, err
	}
	var pids []string
	for _, r := range results {
		for _, row := range r.Rows {
			pids = append(pids, string(row[0]))
		}
	}
	return pids, nil
}

// terminate ends the sessions that hold the advisory key id, and waits (up to
// 5 s each) until they have exited: deleting an advisory lock behind its
// holder's back means ending the holder's session.
func terminate(ctx context.Context, c *pgconn.PgConn, id int64) error {
	pids, err := holders(ctx, c, id)
	if err != nil {
		return err
	}
	if len(pids) == 0 {
		return fmt.Errorf("no session holds advisory key %d", id)
	}
	for _, pid := range pids {
		if _, err := c.Exec(ctx, "SELECT pg_terminate_backend("+pid+", 5000)").ReadAll(); err != nil {
			return err
		}
	}
	return nil
}

func TestConformance(t *testing.T) {
	noLeaks(t)
	server.Need(t)
	u := testkit.URL(t, server.URL)
	var mu sync.Mutex
	var strangers []*pgconn.PgConn
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range strangers {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = c.Close(ctx)
			cancel()
		}
	})
	h := conformance.Harness{
		NewDriver: func(ctx context.Context) (driver.Driver, error) {
			return open(ctx, u)
		},
		// 2 s: the server ends a lock's session when no heartbeat came for
		// the TTL (idle_session_timeout), and with 1 s, heartbeats delayed by
		// a loaded machine ended sessions while the cases still held them
		// (RenewalFailureIsolated's Tamper found "no session holds advisory
		// key": the victim was gone before it was tampered with).
		TTL: 2 * time.Second,
		Tamper: func(ctx context.Context, key string, overwrite bool) error {
			admin, err := pgconn.Connect(ctx, server.URL)
			if err != nil {
				return err
			}
			defer admin.Close(context.WithoutCancel(ctx))
			id := KeyID(key)
			if err := terminate(ctx, admin, id); err != nil {
				return err
			}
			if !overwrite {
				return nil
			}
			// A stranger takes the lock and keeps it until the test ends.
			c, err := pgconn.Connect(ctx, server.URL)
			if err != nil {
				return err
			}
			mu.Lock()
			strangers = append(strangers, c)
			mu.Unlock()
			_, err = c.Exec(ctx, fmt.Sprintf("SELECT pg_advisory_lock(%d)", id)).ReadAll()
			return err
		},
		// A client whose link to the server the partition cases cut: the
		// server sees an idle session, its connection open.
		NewLinkedDriver: containerfaults.LinkedURL(u, open),
		Faults:          server.FaultHooks(),
		// Waiting clients wait in the server's lock queue.
		ClientsServedInOrder: true,
	}
	conformance.Run(t, h)
}
