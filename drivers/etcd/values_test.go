package etcd

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

// valueTTL is the session TTL and lock TTL of the tests of values: their
// holders wait for other requests to queue, which a loaded machine may
// stretch past the shortest session.
const valueTTL = 10 * time.Second

// valueDriver returns a Driver with a session of valueTTL over a client of
// its own.
func valueDriver(t *testing.T) *Driver {
	t.Helper()
	return newTestDriver(t, newCli(t), WithSessionTTL(valueTTL))
}

// valueReq returns a request for key that carries value.
func valueReq(key, value string) driver.Request {
	r := testkit.Request(key, valueTTL)
	r.Value = value
	return r
}

// expectInspect checks that Inspect of key reports exactly the hold of
// value with token (a free lock when value is empty and token zero).
func expectInspect(t *testing.T, d *Driver, key, value string, token uint64, what string) {
	t.Helper()
	info, err := d.Inspect(ctxFor(t), key)
	if err != nil {
		t.Fatalf("%s: Inspect: %v", what, err)
	}
	if info.Value != value || info.Token != token || info.Held != (token != 0) {
		t.Fatalf("%s: Inspect = held %v, value %q, token %d; want value %q, token %d", what, info.Held, info.Value, info.Token, value, token)
	}
}

// A hold's value is stored with it and reported with its own token: for a
// try, for a waiter once it holds (never while it waits), for a single
// reader, and for nobody once the lock is free.
func TestValueRoundTrip(t *testing.T) {
	cli := newCli(t)
	d1, d2 := valueDriver(t), valueDriver(t)
	if !d1.Capabilities().Values {
		t.Fatal("the driver does not declare Values")
	}
	key := testkit.Key(t)
	l1 := mustTry(t, d1, valueReq(key, "node-1 at 10.0.0.1:80"))
	expectInspect(t, d2, key, "node-1 at 10.0.0.1:80", l1.Token(), "a try's hold")

	waiting := testkit.Go(func() (driver.Lease, error) {
		return d2.Acquire(ctxFor(t), testkit.Blocking(valueReq(key, "node-2")))
	})
	waitFor(t, "the waiter's entry", func() bool { return len(entries(t, cli, key)) == 2 })
	expectInspect(t, d1, key, "node-1 at 10.0.0.1:80", l1.Token(), "a hold with a waiter")
	if err := l1.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	l2 := waiting.Within(t, slack+valueTTL, "the waiter's Acquire")
	expectInspect(t, d1, key, "node-2", l2.Token(), "the waiter's hold")
	if err := l2.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	expectInspect(t, d1, key, "", 0, "a free lock")

	r := valueReq(key, "reader")
	r.Mode = driver.Shared
	lr := mustTry(t, d1, r)
	expectInspect(t, d2, key, "reader", lr.Token(), "a single reader")
	_ = lr.Release(ctxFor(t))
}

// Whoever overwrites the holder's entry (an operator with etcdctl) writes
// no grant's value: Inspect reports the hold's token without it.
func TestOverwrittenValueIsNotReported(t *testing.T) {
	cli := newCli(t)
	d := valueDriver(t)
	key := testkit.Key(t)
	l := mustTry(t, d, valueReq(key, "node-1"))
	defer func() { _ = l.Release(ctxFor(t)) }()
	kvs := entries(t, cli, key)
	if len(kvs) != 1 || string(kvs[0].Value) != "node-1" {
		t.Fatalf("etcd keys of the lock: %v; want the holder's, with its value", kvs)
	}
	if _, err := cli.Put(ctxFor(t), string(kvs[0].Key), "stranger"); err != nil {
		t.Fatal(err)
	}
	expectInspect(t, d, key, "", l.Token(), "an overwritten entry")
}

// Grants follow one another through the queue while an inspector reads
// the lock as fast as it can: every value it sees comes with the token of
// the grant that stored it, never an earlier or later grant's.
func TestValueNeverWithAnotherGrantsToken(t *testing.T) {
	const grants = 12
	key := testkit.Key(t)
	cli := newCli(t)
	ds := []*Driver{valueDriver(t), valueDriver(t)}
	inspector := valueDriver(t)

	watch := testkit.WatchValues(func(ctx context.Context) (driver.Info, error) { return inspector.Inspect(ctxFor(t), key) })

	// Each grant's holder waits in the queue behind the previous one, on
	// alternating drivers, so that grants follow each other closely.
	prev := mustTry(t, ds[0], valueReq(key, "v0"))
	watch.Granted("v0", prev.Token())
	for i := 1; i < grants; i++ {
		v := fmt.Sprintf("v%d", i)
		next := testkit.Go(func() (driver.Lease, error) {
			return ds[i%2].Acquire(ctxFor(t), testkit.Blocking(valueReq(key, v)))
		})
		waitFor(t, "the next waiter's entry", func() bool { return len(entries(t, cli, key)) == 2 })
		if err := prev.Release(ctxFor(t)); err != nil {
			t.Fatal(err)
		}
		prev = next.Within(t, slack+valueTTL, "a waiter's Acquire")
		watch.Granted(v, prev.Token())
	}
	_ = prev.Release(ctxFor(t))
	watch.Check(t)
}

// dlock's leader election over this driver: Leader on another client is
// exactly the leader's value and Lease.Token, and Observe sees two leaders
// in order.
func TestElectionOverEtcd(t *testing.T) {
	c1 := testkit.Client(t, valueDriver(t), dlock.WithTTL(valueTTL))
	c2 := testkit.Client(t, valueDriver(t), dlock.WithTTL(valueTTL))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	testkit.ElectionRoundTrip(t, ctx, c1, c2, testkit.Key(t))
}
