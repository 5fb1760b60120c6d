package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
)

// A caller's *pgxpool.Pool works as it is, and stays open after the client
// closes.
func TestNewFromPgxpool(t *testing.T) {
	server.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, server.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	d, err := New(pool)
	if err != nil {
		t.Fatal(err)
	}
	c, err := dlock.New(d)
	if err != nil {
		t.Fatal(err)
	}
	m := testkit.Mutex(t, c, "pgxpool-test/"+t.Name())
	l := testkit.Lock(t, ctx, m)
	if l.Token() == 0 {
		t.Error("no fencing token")
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := pool.Ping(ctx); err != nil {
		t.Errorf("the caller's pool was closed with the client: %v", err)
	}
}
