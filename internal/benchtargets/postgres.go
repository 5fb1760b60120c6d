package benchtargets

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/url"

	"github.com/jackc/pgx/v5"

	"github.com/dlock-go/dlock/internal/benchkit"
)

// postgresMaxHeld is how many locks the held-locks measurement holds: the
// postgres driver spends a connection (a server backend) per held lock.
const postgresMaxHeld = 50

// Postgres is the PostgreSQL server at url (the postgres driver must be
// imported). Raw is pg_advisory_lock then pg_advisory_unlock on one pgx
// connection. Requests are not counted: PostgreSQL's statistics are flushed
// too lazily to attribute. The returned func closes the raw connection.
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
	return t, func() { _ = raw.Close(context.Background()) }, nil
}
