package benchtargets

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/url"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/dlock-go/dlock/internal/benchkit"
)

// postgresMaxHeld is how many locks the held-locks measurement holds: the
// postgres driver spends a connection (a server backend) per held lock.
const postgresMaxHeld = 50

// Postgres is the PostgreSQL server at url (the postgres driver must be
// imported). Raw is pg_advisory_lock then pg_advisory_unlock on one pgx
// connection. Requests are the statements the server ran, as
// pg_stat_statements counts them (the project's image preloads it; on a
// server without it they are not counted), so on a dedicated server they
// are the benchmark's own. The returned func closes the raw and statistics connections.
func Postgres(ctx context.Context, rawURL string) (benchkit.Target, func(), error) {
	raw, err := pgx.Connect(ctx, rawURL)
	if err != nil {
		return benchkit.Target{}, nil, err
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return benchkit.Target{}, nil, err
	}
	q := u.Query()
	q.Set("dlock_max_conns", fmt.Sprint(postgresMaxHeld+8))
	u.RawQuery = q.Encode()
	t := Open("postgres", u.String())
	t.MaxHeld = postgresMaxHeld
	t.Raw = func(ctx context.Context, key string) error {
		sum := sha256.Sum256([]byte(key))
		id := int64(binary.BigEndian.Uint64(sum[:8]))
		if _, err := raw.Exec(ctx, "SELECT pg_advisory_lock($1)", id); err != nil {
			return err
		}
		_, err := raw.Exec(ctx, "SELECT pg_advisory_unlock($1)", id)
		return err
	}
	stats, err := pgx.Connect(ctx, rawURL)
	if err != nil {
		_ = raw.Close(ctx)
		return benchkit.Target{}, nil, err
	}
	if statementsCounted(ctx, stats) {
		var mu sync.Mutex // a pgx connection serves one query at a time
		t.Requests = func() uint64 {
			mu.Lock()
			defer mu.Unlock()
			return statements(stats)
		}
	}
	return t, func() {
		_ = raw.Close(context.Background())
		_ = stats.Close(context.Background())
	}, nil
}

// statementsCounted makes sure pg_stat_statements is there, and reports
// whether it is (the library must be preloaded for its view to answer).
func statementsCounted(ctx context.Context, conn *pgx.Conn) bool {
	if _, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		return false
	}
	return conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_statements").Scan(new(int64)) == nil
}

// countQuery sums the calls of every statement but itself.
const countQuery = "SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%'"

// statements returns how many statements the server has run (other than
// the count's own), or 0 when it cannot tell.
func statements(conn *pgx.Conn) uint64 {
	var n int64
	if err := conn.QueryRow(context.Background(), countQuery).Scan(&n); err != nil {
		return 0
	}
	return uint64(n)
}
