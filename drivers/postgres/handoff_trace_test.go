package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
)

// TestHandoffTrace is a measurement, not a check (opt-in: set
// DLOCK_TRACE=1): it hands one lock back and forth between two independent
// Clients (one waiter, blocked in the server), then does the same with raw
// pg_advisory_lock / pg_advisory_unlock on two pgx connections (as
// bench/peers' raw contender does), timestamping every write to and read
// from each connection's socket. Each handoff is split into: Unlock called →
// the holder's release statement written → its reply read, and the
// waiter's reply (its lock statement, blocked in the server until the
// release) read → its Lock returned; the p50 of each is logged, for dlock
// and raw side by side.
//
//	DLOCK_TRACE=1 go test -run HandoffTrace -v ./drivers/postgres/
//
// DLOCK_TRACE_ROUNDS changes the 400 handoffs of each.
func TestHandoffTrace(t *testing.T) {
	if os.Getenv("DLOCK_TRACE") == "" {
		t.Skip("a measurement: set DLOCK_TRACE=1 to run it")
	}
	server.Need(t)
	rounds := 400
	if s := os.Getenv("DLOCK_TRACE_ROUNDS"); s != "" {
		if _, err := fmt.Sscan(s, &rounds); err != nil || rounds < 1 {
			t.Fatalf("DLOCK_TRACE_ROUNDS=%q: want a positive integer", s)
		}
	}
	ctx := t.Context()
	watcher := rawConn(t)
	key := "trace/" + testkit.NewID()

	// dlock: two Clients, each with a Driver dialling traced connections.
	var dl [2]pgTraced
	for i := range dl {
		cfg, err := pgconn.ParseConfig(server.URL)
		if err != nil {
			t.Fatal(err)
		}
		cfg.DialFunc = dl[i].dial(cfg.DialFunc)
		d, err := NewFromConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		c, err := dlock.New(d)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(context.WithoutCancel(ctx)) })
		m, err := c.Mutex(key, dlock.WithTTL(8*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		dl[i].lock = func(ctx context.Context) (func(context.Context) error, error) {
			l, err := m.Lock(ctx)
			if err != nil {
				return nil, err
			}
			return l.Unlock, nil
		}
	}

	// Raw: pg_advisory_lock and pg_advisory_unlock on a pgx connection each.
	var raw [2]pgTraced
	sum := sha256.Sum256([]byte(key + "/raw"))
	id := int64(binary.BigEndian.Uint64(sum[:8]))
	for i := range raw {
		cfg, err := pgx.ParseConfig(server.URL)
		if err != nil {
			t.Fatal(err)
		}
		cfg.DialFunc = raw[i].dial(cfg.DialFunc)
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close(context.WithoutCancel(ctx)) })
		raw[i].lock = func(ctx context.Context) (func(context.Context) error, error) {
			if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", id); err != nil {
				return nil, err
			}
			return func(ctx context.Context) error {
				_, err := conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", id)
				return err
			}, nil
		}
	}

	for _, hold := range []time.Duration{0, 200 * time.Microsecond, 5 * time.Millisecond} {
		for _, run := range []struct {
			name string
			pair *[2]pgTraced
		}{{"dlock", &dl}, {"raw", &raw}} {
			name := run.name + ", released once the waiter is queued in the server"
			switch {
			case hold == 200*time.Microsecond:
				name = run.name + ", released 200 µs (spun) after the waiter called Lock (benchkit's default)"
			case hold > 0:
				name = run.name + ", released 5 ms (slept) after the waiter called Lock (bench/peers)"
			}
			pingPong(ctx, t, watcher, run.pair, 20, hold) // warm-up: connections made, statements prepared
			for i := range run.pair {
				run.pair[i].reset()
			}
			hs := pingPong(ctx, t, watcher, run.pair, rounds, hold)
			logPgSteps(t, name, hs, run.pair)
		}
	}
}

// pgTraced is one contender: its Lock, and the socket events of its
// connections.
type pgTraced struct {
	lock func(ctx context.Context) (func(context.Context) error, error)

	mu     sync.Mutex
	writes []time.Time
	reads  []time.Time
}

func (p *pgTraced) reset() {
	p.mu.Lock()
	p.writes, p.reads = nil, nil
	p.mu.Unlock()
}

// dial wraps a DialFunc (pgconn's default when nil) so that its
// connections record the time of every write and of every read that
// returned data.
func (p *pgTraced) dial(next pgconn.DialFunc) pgconn.DialFunc {
	if next == nil {
		var d net.Dialer
		next = d.DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &tracedConn{Conn: c, p: p}, nil
	}
}

// tracedConn is a connection that records its writes and reads in p.
type tracedConn struct {
	net.Conn
	p *pgTraced
}

func (c *tracedConn) Write(b []byte) (int, error) {
	now := time.Now()
	c.p.mu.Lock()
	c.p.writes = append(c.p.writes, now)
	c.p.mu.Unlock()
	return c.Conn.Write(b)
}

func (c *tracedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		now := time.Now()
		c.p.mu.Lock()
		c.p.reads = append(c.p.reads, now)
		c.p.mu.Unlock()
	}
	return n, err
}

// pgHandoff is one traced handoff: from holder to waiter (indexes into
// the pair), Unlock called at unlock, the waiter's Lock returned at locked.
type pgHandoff struct {
	holder, waiter int
	unlock, locked time.Time
}

// pingPong passes the lock between the pair rounds times. When hold is 0,
// each round the holder releases only once the waiter is blocked in the
// server (watcher sees a waiting advisory lock in pg_locks), so that every
// handoff is the server's wake-up of a queued backend; otherwise it
// releases hold after the waiter called Lock, as benchkit's handoff
// measurement does (spun up to 200 µs, slept above, as benchkit holds).
func pingPong(ctx context.Context, t *testing.T, watcher *pgconn.PgConn, pair *[2]pgTraced, rounds int, hold time.Duration) []pgHandoff {
	t.Helper()
	unlock, err := pair[0].lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	holder := 0
	var hs []pgHandoff
	for range rounds {
		waiter := 1 - holder
		type got struct {
			unlock func(context.Context) error
			at     time.Time
			err    error
		}
		done := make(chan got, 1)
		calling := make(chan struct{})
		go func() {
			close(calling)
			u, err := pair[waiter].lock(ctx)
			done <- got{u, time.Now(), err}
		}()
		<-calling
		switch {
		case hold == 0:
			waitBlocked(ctx, t, watcher)
		case hold <= 200*time.Microsecond:
			for end := time.Now().Add(hold); time.Now().Before(end); {
			}
		default:
			time.Sleep(hold) // a hold, as benchkit's: the measurement's subject, not synchronisation
		}
		h := pgHandoff{holder: holder, waiter: waiter, unlock: time.Now()}
		if err := unlock(ctx); err != nil {
			t.Fatal(err)
		}
		g := <-done
		if g.err != nil {
			t.Fatal(g.err)
		}
		h.locked = g.at
		hs = append(hs, h)
		unlock, holder = g.unlock, waiter
	}
	if err := unlock(ctx); err != nil {
		t.Fatal(err)
	}
	return hs
}

// waitBlocked returns once some advisory lock request waits in the server.
func waitBlocked(ctx context.Context, t *testing.T, watcher *pgconn.PgConn) {
	t.Helper()
	for ctx.Err() == nil {
		res := watcher.ExecParams(ctx, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted", nil, nil, nil, nil).Read()
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		if len(res.Rows) == 1 && string(res.Rows[0][0]) != "0" {
			return
		}
	}
	t.Fatal(ctx.Err())
}

// logPgSteps logs the p50 and p90 of each step of the handoffs hs.
func logPgSteps(t *testing.T, name string, hs []pgHandoff, pair *[2]pgTraced) {
	steps := map[string][]time.Duration{}
	var order []string
	add := func(s string, d time.Duration) {
		if _, ok := steps[s]; !ok {
			order = append(order, s)
		}
		steps[s] = append(steps[s], d)
	}
	after := func(ts []time.Time, t0 time.Time) (time.Time, bool) {
		i, _ := slices.BinarySearchFunc(ts, t0, time.Time.Compare)
		if i == len(ts) {
			return time.Time{}, false
		}
		return ts[i], true
	}
	before := func(ts []time.Time, t1 time.Time) (time.Time, bool) {
		i, _ := slices.BinarySearchFunc(ts, t1, time.Time.Compare)
		if i == 0 {
			return time.Time{}, false
		}
		return ts[i-1], true
	}
	for i := range pair {
		pair[i].mu.Lock()
		defer pair[i].mu.Unlock()
		slices.SortFunc(pair[i].writes, time.Time.Compare)
		slices.SortFunc(pair[i].reads, time.Time.Compare)
	}
	late := 0 // handoffs whose waiter wrote its lock statement after the release
	for _, h := range hs {
		a, b := &pair[h.holder], &pair[h.waiter]
		relSent, ok1 := after(a.writes, h.unlock)
		relReply, ok2 := after(a.reads, relSent)
		grant, ok3 := before(b.reads, h.locked)
		if !ok1 || !ok2 || !ok3 || grant.Before(relSent) {
			continue
		}
		if asked, ok := before(b.writes, grant); ok {
			add("0 waiter's lock statement written → release written", relSent.Sub(asked))
			if asked.After(relSent) {
				late++
			}
		}
		add("1 Unlock called → release written", relSent.Sub(h.unlock))
		add("2 release written → its reply read (holder)", relReply.Sub(relSent))
		add("3 release written → waiter's grant read", grant.Sub(relSent))
		add("  waiter's grant read − holder's reply read", grant.Sub(relReply))
		add("4 waiter's grant read → Lock returns", h.locked.Sub(grant))
		add("= handoff: Unlock called → Lock returns", h.locked.Sub(h.unlock))
	}
	t.Logf("%s: %d handoffs traced of %d; in %d the waiter wrote its lock statement after the release", name, len(steps["= handoff: Unlock called → Lock returns"]), len(hs), late)
	for _, s := range order {
		ds := steps[s]
		slices.Sort(ds)
		t.Logf("%s:   %-50s p50 %8v  p90 %8v", name, s, ds[len(ds)/2].Round(time.Microsecond), ds[len(ds)*9/10].Round(time.Microsecond))
	}
}
