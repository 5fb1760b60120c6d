package testserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// PostgresImage is the image testenv/setup builds from
// testenv/images/postgres: PostgreSQL 15 from Debian, with PgBouncer beside
// it for [PgBouncerSpec].
const PostgresImage = "dlock-test/postgres:latest"

// The test server's superuser, password and database, made by the image.
const (
	PostgresUser     = "dlock"
	PostgresPassword = "dlock"
	PostgresDatabase = "dlock"
)

// EnvPostgresURL names the environment variable that points the tests at an
// existing PostgreSQL server (e.g.
// "postgres://user:password@127.0.0.1:5432/db?sslmode=disable") instead of a
// container. Such a server has no fault hooks, and the tests may take
// advisory locks and create the driver's objects (a sequence and a table) in
// its database; the role must be allowed to terminate its own sessions
// (pg_terminate_backend), as every role is for sessions of the same role.
const EnvPostgresURL = "DLOCK_TEST_POSTGRES_URL"

// EnvPgBouncerURL names the environment variable that points the pooler test
// at an existing PgBouncer in transaction mode instead of a container.
const EnvPgBouncerURL = "DLOCK_TEST_PGBOUNCER_URL"

// PostgresSpec describes the PostgreSQL container: the server in the
// foreground, readiness by a real login and query.
func PostgresSpec() Spec {
	return Spec{
		Name:  "postgres",
		Image: PostgresImage,
		Port:  "5432/tcp",
		Cmd:   []string{"postgres"},
		Ready: PingPostgres,
	}
}

// PgBouncerSpec describes a second container of the same image in which
// PgBouncer listens in front of the server, in poolMode "transaction" or
// "session"; the published port is PgBouncer's. Readiness is a login and
// query through PgBouncer, which reaches the server.
func PgBouncerSpec(poolMode string) Spec {
	cmd := "postgres-pgbouncer"
	if poolMode == "session" {
		cmd = "postgres-pgbouncer-session"
	}
	return Spec{
		Name:  "pgbouncer-" + poolMode,
		Image: PostgresImage,
		Port:  "6432/tcp",
		Cmd:   []string{cmd},
		Ready: PingPostgres,
	}
}

// PostgresURL returns the URL of the test database at addr ("host:port").
func PostgresURL(addr string) string {
	return fmt.Sprintf("postgres://%s:%s@%s/%s?sslmode=disable", PostgresUser, PostgresPassword, addr, PostgresDatabase)
}

// StartPostgres starts a PostgreSQL container; see [Start].
func StartPostgres(ctx context.Context) (*Server, error) {
	return Start(ctx, PostgresSpec())
}

// PostgresTarget returns the PostgreSQL server the tests should use: the one
// named by DLOCK_TEST_POSTGRES_URL when it is set (Server nil), else a new
// container, with the URL of its test database. Its signature fits [Main].
func PostgresTarget(ctx context.Context) (Target, error) {
	return target(ctx, EnvPostgresURL, StartPostgres, PostgresURL)
}

// PgBouncerTarget returns a PgBouncer in front of a PostgreSQL server, in
// poolMode "transaction" or "session": for transaction mode the one
// DLOCK_TEST_PGBOUNCER_URL names, if set, and otherwise a new container
// (which the caller terminates with Target.Close).
func PgBouncerTarget(ctx context.Context, poolMode string) (Target, error) {
	if poolMode != "transaction" && poolMode != "session" {
		return Target{}, fmt.Errorf("testserver: PgBouncer pool mode %q: want transaction or session", poolMode)
	}
	if url := os.Getenv(EnvPgBouncerURL); url != "" && poolMode == "transaction" {
		return Target{URL: url}, nil
	}
	srv, err := Start(ctx, PgBouncerSpec(poolMode))
	if err != nil {
		return Target{}, err
	}
	return Target{URL: PostgresURL(srv.Addr()), Server: srv}, nil
}

// PingPostgres logs in to the test database at addr with the test
// credentials and runs SELECT 1. A TCP connect is not enough: Docker's port
// proxy accepts connections before the server listens, and the server
// refuses logins while it starts ("the database system is starting up").
// ctx bounds the whole exchange.
func PingPostgres(ctx context.Context, addr string) error {
	conn, err := pgconn.Connect(ctx, PostgresURL(addr))
	if err != nil {
		return err
	}
	defer func() {
		// Bounded: a Terminate to a frozen server would hang.
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = conn.Close(closeCtx)
		cancel()
	}()
	results, err := conn.Exec(ctx, "SELECT 1").ReadAll()
	if err != nil {
		return err
	}
	if len(results) != 1 || len(results[0].Rows) != 1 || string(results[0].Rows[0][0]) != "1" {
		return errors.New("postgres: SELECT 1 did not return 1")
	}
	return nil
}
