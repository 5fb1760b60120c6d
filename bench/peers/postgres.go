package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"

	"github.com/jackc/pgx/v5"

	"github.com/dlock-go/dlock/internal/benchkit"
	"github.com/dlock-go/dlock/internal/benchtargets"
	"github.com/dlock-go/dlock/internal/testserver"
)

// postgresBackend is one PostgreSQL server: dlock and the raw advisory
// lock, pg_advisory_lock then pg_advisory_unlock, on a connection per
// contender (the server queues the waiters).
var postgresBackend = backend{name: "postgres", start: onServer(testserver.StartPostgres,
	func(ctx context.Context, addr string) (benchkit.Target, func(), error) {
		return benchtargets.Postgres(ctx, testserver.PostgresURL(addr))
	},
	func(addr string) []peer {
		url := testserver.PostgresURL(addr)
		return []peer{{name: "pg_advisory_lock", newLocker: func(ctx context.Context, key string) (benchkit.Locker, func(), error) {
			conn, err := pgx.Connect(ctx, url)
			if err != nil {
				return nil, nil, err
			}
			sum := sha256.Sum256([]byte(key))
			id := int64(binary.BigEndian.Uint64(sum[:8]))
			return benchkit.LockerFunc(func(ctx context.Context) (func(context.Context) error, error) {
				if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", id); err != nil {
					return nil, err
				}
				return func(ctx context.Context) error {
					_, err := conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", id)
					return err
				}, nil
			}), func() { _ = conn.Close(context.WithoutCancel(ctx)) }, nil
		}}}
	})}
