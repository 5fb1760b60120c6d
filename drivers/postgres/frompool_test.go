package postgres

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dlock-go/dlock/internal/testkit"
)

// testPool is a minimal pool with pgxpool's shape (Acquire, then Hijack or
// Release on the connection): pgxpool itself is not a dependency of this
// module. It makes real connections to the test server.
type testPool struct {
	url      string
	acquired atomic.Int64
	hijacked atomic.Int64
	released atomic.Int64
	closed   atomic.Bool
}

type testPoolConn struct {
	p *testPool
	c *pgx.Conn
}

func (p *testPool) Acquire(ctx context.Context) (*testPoolConn, error) {
	c, err := pgx.Connect(ctx, p.url)
	if err != nil {
		return nil, err
	}
	p.acquired.Add(1)
	return &testPoolConn{p: p, c: c}, nil
}

func (c *testPoolConn) Hijack() *pgx.Conn {
	c.p.hijacked.Add(1)
	return c.c
}

func (c *testPoolConn) Release() {
	c.p.released.Add(1)
	_ = c.c.Close(context.Background())
}

func TestNewFromPool(t *testing.T) {
	server.Need(t)
	pool := &testPool{url: server.URL}
	d, err := New(pool) // C inferred, as for *pgxpool.Pool
	if err != nil {
		t.Fatal(err)
	}
	other := newTestDriver(t)
	key := testkit.Key(t)
	l := mustTry(t, d, testkit.Request(key, 5*time.Second))
	expectLocked(t, other, testkit.Request(key, time.Second), "the pool's Driver holds it")
	mustRelease(t, l)
	mustRelease(t, mustTry(t, d, testkit.Request(key, time.Second))) // the same connection, kept
	if a, h, r := pool.acquired.Load(), pool.hijacked.Load(), pool.released.Load(); a != 1 || h != 1 || r != 0 {
		t.Fatalf("pool: %d acquired, %d hijacked, %d released; want one connection taken out of the pool for good, none given back", a, h, r)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if pool.released.Load() != 0 || pool.closed.Load() {
		t.Fatal("Close touched the caller's pool")
	}
	mustRelease(t, mustTry(t, other, testkit.Request(key, time.Second)))
}
