package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

// valueTTL is the lock TTL of the tests of values: long enough that no
// lease runs out while a test waits for a waiter to queue.
const valueTTL = 10 * time.Second

// valueReq returns a request for key that carries value.
func valueReq(key, value string) driver.Request {
	r := testkit.Request(key, valueTTL)
	r.Value = value
	return r
}

// expectInspect checks that Inspect of key through d reports the value and
// token want (value "" and token 0: a hold without a value, or none), and
// whether the lock is held.
func expectInspect(t *testing.T, d *Driver, key string, held bool, value string, token uint64, what string) {
	t.Helper()
	info, err := d.Inspect(ctxFor(t), key)
	if err != nil {
		t.Fatalf("%s: Inspect: %v", what, err)
	}
	if info.Held != held || info.Value != value || info.Token != token {
		t.Fatalf("%s: Inspect = held %v, value %q, token %d; want held %v, value %q, token %d", what, info.Held, info.Value, info.Token, held, value, token)
	}
}

// waitForWaiters polls Inspect until n sessions wait for key, as an
// operator would: waiting in PostgreSQL's queue shows nowhere else.
func waitForWaiters(t *testing.T, d *Driver, key string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := d.Inspect(ctxFor(t), key)
		if err != nil {
			t.Fatal(err)
		}
		if info.Waiters == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions wait for %q, want %d", info.Waiters, key, n)
		}
		time.Sleep(5 * time.Millisecond) // polls the server's view
	}
}

// A hold's value is stored with it and reported with its own token: for a
// try, for a waiter once it holds (never while it waits), and for nobody
// once the lock is free or held without a value.
func TestValueRoundTrip(t *testing.T) {
	d1, d2 := newTestDriver(t), newTestDriver(t)
	if !d1.Capabilities().Values {
		t.Fatal("the driver does not declare Values")
	}
	key := testkit.Key(t)
	expectInspect(t, d2, key, false, "", 0, "a free lock")
	l1 := mustTry(t, d1, valueReq(key, "node-1 at 10.0.0.1:80"))
	expectInspect(t, d2, key, true, "node-1 at 10.0.0.1:80", l1.Token(), "a try's hold")

	waiting := testkit.Go(func() (driver.Lease, error) {
		return d2.Acquire(ctxFor(t), testkit.Blocking(valueReq(key, "node-2")))
	})
	waitForWaiters(t, d1, key, 1)
	expectInspect(t, d1, key, true, "node-1 at 10.0.0.1:80", l1.Token(), "a hold with a waiter")
	mustRelease(t, l1)
	l2 := waiting.Within(t, 20*time.Second, "the waiter's Acquire")
	expectInspect(t, d1, key, true, "node-2", l2.Token(), "the waiter's hold")
	mustRelease(t, l2)
	expectInspect(t, d1, key, false, "", 0, "a free lock after two holds")
}

// The row of a hold outlives the hold (a release only unlocks), and the
// same server session may hold the lock again, without a value: Inspect
// must not take the old row for the new hold's, although its backend holds
// the lock. The tag of the row's token is what tells them apart.
func TestValueOfEndedHoldIsNotReported(t *testing.T) {
	admin := rawConn(t)
	d := newTestDriver(t, WithMaxConns(1)) // one session: every hold is on it
	ins := newTestDriver(t)                // inspects: d's session is the lease's
	key := testkit.Key(t)
	l := mustTry(t, d, valueReq(key, "node-1"))
	pid := queryText(t, admin, fmt.Sprintf("SELECT pid::text FROM public.dlock_values WHERE gkey = %d", KeyID(key)))
	mustRelease(t, l)
	expectInspect(t, ins, key, false, "", 0, "after the release")

	plain := mustTry(t, d, testkit.Request(key, valueTTL))
	holders, err := holders(ctxFor(t), admin, KeyID(key))
	if err != nil || len(holders) != 1 || holders[0] != pid {
		t.Fatalf("holders of the plain lock: %v, %v; want the session %s that held the value", holders, err, pid)
	}
	if got := queryText(t, admin, fmt.Sprintf("SELECT value FROM public.dlock_values WHERE gkey = %d", KeyID(key))); got != "node-1" {
		t.Fatalf("the earlier hold's row holds %q, want it left as it was (node-1)", got)
	}
	expectInspect(t, ins, key, true, "", 0, "the same session's plain hold")
	mustRelease(t, plain)

	// And again with a value: the row is the new hold's.
	l = mustTry(t, d, valueReq(key, "node-1 again"))
	if l.Token() <= plain.Token() {
		t.Fatalf("token %d after %d", l.Token(), plain.Token())
	}
	expectInspect(t, ins, key, true, "node-1 again", l.Token(), "the same session's next hold with a value")
	mustRelease(t, l)
}

// Grants follow one another through PostgreSQL's queue while an inspector
// reads the lock as fast as it can: every value it sees comes with the
// token of the grant that stored it.
func TestValueNeverWithAnotherGrantsToken(t *testing.T) {
	const grants = 12
	key := testkit.Key(t)
	ds := []*Driver{newTestDriver(t), newTestDriver(t)}
	inspector := newTestDriver(t)

	watch := testkit.WatchValues(func(ctx context.Context) (driver.Info, error) { return inspector.Inspect(ctxFor(t), key) })

	prev := mustTry(t, ds[0], valueReq(key, "v0"))
	watch.Granted("v0", prev.Token())
	for i := 1; i < grants; i++ {
		v := fmt.Sprintf("v%d", i)
		next := testkit.Go(func() (driver.Lease, error) {
			return ds[i%2].Acquire(ctxFor(t), testkit.Blocking(valueReq(key, v)))
		})
		waitForWaiters(t, ds[(i+1)%2], key, 1)
		mustRelease(t, prev)
		prev = next.Within(t, 20*time.Second, "a waiter's Acquire")
		watch.Granted(v, prev.Token())
	}
	mustRelease(t, prev)
	watch.Check(t)
}

// A database migrated by an earlier version has no table of values. A
// driver whose role may not create it still opens and locks as before, and
// only an acquisition with a value fails, with ErrMigration, until
// Migration has been run; a role that may create it creates it on first
// use.
func TestValuesOnEarlierMigration(t *testing.T) {
	admin := rawConn(t)
	suffix := strings.ToLower(testkit.NewID()[:12])
	schema, role := "old_"+suffix, "r_"+suffix
	exec := func(sql string) {
		t.Helper()
		if _, err := admin.Exec(ctxFor(t), sql).ReadAll(); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	// The objects of an earlier version's migration, and a role that may
	// use them but create nothing.
	exec(fmt.Sprintf(`CREATE SCHEMA %[1]s;
CREATE SEQUENCE %[1]s.dlock_fence AS bigint;
CREATE UNLOGGED TABLE %[1]s.dlock_owner_groups (gkey bigint PRIMARY KEY, token bigint NOT NULL);
CREATE ROLE %[2]s LOGIN PASSWORD 'pw';
GRANT USAGE ON SCHEMA %[1]s TO %[2]s;
GRANT USAGE, UPDATE ON SEQUENCE %[1]s.dlock_fence TO %[2]s;
GRANT SELECT, INSERT, UPDATE, DELETE ON %[1]s.dlock_owner_groups TO %[2]s;`, schema, role))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = admin.Exec(ctx, fmt.Sprintf("DROP SCHEMA %s CASCADE; DROP ROLE %s;", schema, role)).ReadAll()
	})
	cfg, err := pgconn.ParseConfig(server.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.User, cfg.Password = role, "pw"
	d := testkit.Closing(t, "NewFromConfig", func() (*Driver, error) { return NewFromConfig(cfg, WithSchema(schema)) })
	key := testkit.Key(t)

	l := mustTry(t, d, testkit.Request(key, valueTTL))
	expectInspect(t, d, key, true, "", 0, "a plain hold on the earlier database")
	mustRelease(t, l)
	if _, err := d.Acquire(ctxFor(t), valueReq(key, "node-1")); !errors.Is(err, ErrMigration) {
		t.Fatalf("Acquire with a value on the earlier database: %v, want ErrMigration", err)
	}
	expectInspect(t, d, key, false, "", 0, "after the refused acquisition")

	exec(strings.ReplaceAll(Migration, "public.", schema+".") +
		fmt.Sprintf("\nGRANT SELECT, INSERT, UPDATE, DELETE ON %s.dlock_values TO %s;", schema, role))
	l = mustTry(t, d, valueReq(key, "node-1"))
	expectInspect(t, d, key, true, "node-1", l.Token(), "a hold with a value once migrated")
	mustRelease(t, l)

	// A role that may create objects upgrades the earlier database itself.
	exec(fmt.Sprintf("DROP TABLE %[1]s.dlock_values; GRANT CREATE ON SCHEMA %[1]s TO %[2]s;", schema, role))
	d2 := testkit.Closing(t, "NewFromConfig", func() (*Driver, error) { return NewFromConfig(cfg, WithSchema(schema)) })
	l = mustTry(t, d2, valueReq(key, "node-2"))
	expectInspect(t, d2, key, true, "node-2", l.Token(), "a hold with a value after the driver's own migration")
	mustRelease(t, l)
}

// dlock's leader election over this driver: Leader on another client is
// exactly the leader's value and Lease.Token, and Observe sees two leaders
// in order.
func TestElectionOverPostgres(t *testing.T) {
	c1 := testkit.Client(t, newTestDriver(t), dlock.WithTTL(valueTTL))
	c2 := testkit.Client(t, newTestDriver(t), dlock.WithTTL(valueTTL))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	testkit.ElectionRoundTrip(t, ctx, c1, c2, testkit.Key(t))
}
