package redis

import (
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

// A hold's value (Capabilities.Values) on one server: stored by Acquire,
// kept by a resend and an Extend, replaced by a Transfer, gone with a
// Release or an expiry, and reported by Inspect with the same hold's token.

// fieldsOf returns the field names of key's lock hash ("v:ID" and "p:ID"
// fields among them), sorted as HKEYS gives them.
func fieldsOf(t *testing.T, rdb *goredis.Client, key string) []string {
	t.Helper()
	f, err := rdb.HKeys(ctxFor(t), namesOf(DefaultKeyPrefix, key).lock).Result()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// expectHolder checks that Inspect reports key held by owner with token and
// value.
func expectHolder(t *testing.T, d *Driver, key, owner string, token uint64, value, when string) {
	t.Helper()
	info, err := d.Inspect(ctxFor(t), key)
	if err != nil || !info.Held || info.Owner != owner || info.Token != token || info.Value != value {
		t.Errorf("%s: Inspect = %+v, %v; want held by %s with token %d and value %q", when, info, err, owner, token, value)
	}
}

// expectNoValue checks that key's lock is free, reports no value, and left
// no field behind.
func expectNoValue(t *testing.T, d *Driver, rdb *goredis.Client, key, when string) {
	t.Helper()
	info, err := d.Inspect(ctxFor(t), key)
	if err != nil || info.Held || info.Value != "" {
		t.Errorf("%s: Inspect = %+v, %v; want free, with no value", when, info, err)
	}
	if f := fieldsOf(t, rdb, key); len(f) != 0 {
		t.Errorf("%s: the lock hash still has %v", when, f)
	}
}

func TestValueRoundTrip(t *testing.T) {
	rdb := newRDB(t)
	d := newTestDriver(t, rdb)
	if !d.Capabilities().Values {
		t.Fatal("Capabilities().Values is false")
	}
	ctx := ctxFor(t)
	key := testkit.Key(t)

	req := reqOf(key, time.Minute, driver.Exclusive, "")
	req.Value = "node-a:7000"
	l := mustAcquire(t, d, req)
	expectHolder(t, d, key, req.ID, l.Token(), "node-a:7000", "after Acquire")
	// A resend of the same request (a lost reply) keeps the value, and so
	// does a renewal.
	if again := mustAcquire(t, d, req); again.Token() != l.Token() {
		t.Fatalf("resend: token %d, want %d", again.Token(), l.Token())
	}
	if err := l.Extend(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	expectHolder(t, d, key, req.ID, l.Token(), "node-a:7000", "after a resend and an Extend")

	// A Transfer stores the new request's value; the old one goes with the
	// old hold.
	to := reqOf(key, time.Minute, driver.Exclusive, "")
	to.Value = "node b"
	nl, err := d.Transfer(ctx, l, to)
	if err != nil {
		t.Fatal(err)
	}
	expectHolder(t, d, key, to.ID, nl.Token(), "node b", "after Transfer")
	for _, f := range fieldsOf(t, rdb, key) {
		if strings.HasSuffix(f, req.ID) {
			t.Errorf("after Transfer the old hold's field %s is left", f)
		}
	}
	// A transfer to a request without a value leaves none.
	bare := reqOf(key, time.Minute, driver.Exclusive, "")
	bl, err := d.Transfer(ctx, nl, bare)
	if err != nil {
		t.Fatal(err)
	}
	expectHolder(t, d, key, bare.ID, bl.Token(), "", "after a Transfer without a value")
	mustRelease(t, bl)
	expectNoValue(t, d, rdb, key, "after Release")

	// Release of a hold with a value (the release script's short path).
	req = reqOf(key, time.Minute, driver.Exclusive, "")
	req.Value = "v"
	mustRelease(t, mustAcquire(t, d, req))
	expectNoValue(t, d, rdb, key, "after Release of a fresh hold")
	if info, err := d.Inspect(ctx, key); err != nil || info.Token <= bl.Token() {
		t.Errorf("free lock: %+v, %v; want the latest token, above %d", info, err, bl.Token())
	}
}

// An expired hold's value goes with it: the whole key when it was the only
// hold, its fields when another hold lives on.
func TestValueExpires(t *testing.T) {
	rdb := newRDB(t)
	d := newTestDriver(t, rdb)
	key := testkit.Key(t)

	req := reqOf(key, 200*time.Millisecond, driver.Exclusive, "")
	req.Value = "short"
	mustAcquire(t, d, req)
	// Inspect reports the hold ended at its own expiry, and the hash goes
	// at the key's, which Redis may reach a moment later: wait for both
	// (a value left for good would still time out here).
	waitServer(t, "the hold's expiry", func() bool {
		info, err := d.Inspect(ctxFor(t), key)
		return err == nil && !info.Held && len(fieldsOf(t, rdb, key)) == 0
	})
	expectNoValue(t, d, rdb, key, "after the only hold expired")

	// Two entries of one reentrant owner: the re-entry carries the value of
	// the hold it joins, and its fields go when it expires alone.
	first := reqOf(key, time.Minute, driver.Exclusive, "owner")
	first.Value = "first"
	l := mustAcquire(t, d, first)
	second := reqOf(key, 200*time.Millisecond, driver.Exclusive, "owner")
	second.Value = "second"
	mustAcquire(t, d, second)
	if v, err := rdb.HGet(ctxFor(t), namesOf(DefaultKeyPrefix, key).lock, "v:"+second.ID).Result(); err != nil || v != "first" {
		t.Errorf("the re-entry's value: %q, %v; want the joined hold's, %q", v, err, "first")
	}
	expectHolder(t, d, key, "owner", l.Token(), "first", "two entries")
	waitServer(t, "the re-entry's expiry", func() bool { return holders(t, d, key) == 1 })
	if err := l.Extend(ctxFor(t), time.Minute); err != nil { // a write, which prunes
		t.Fatal(err)
	}
	for _, f := range fieldsOf(t, rdb, key) {
		if strings.HasSuffix(f, second.ID) {
			t.Errorf("after the re-entry expired, its field %s is left", f)
		}
	}
	expectHolder(t, d, key, "owner", l.Token(), "first", "after the re-entry expired")
	mustRelease(t, l)
	expectNoValue(t, d, rdb, key, "after Release")
}

// Readers have no single holder: Inspect reports no value for a read lock.
func TestValueNotReportedForReaders(t *testing.T) {
	d := newTestDriver(t, newRDB(t))
	key := testkit.Key(t)
	req := reqOf(key, time.Minute, driver.Shared, "")
	req.Value = "reader"
	l := mustAcquire(t, d, req)
	if info, err := d.Inspect(ctxFor(t), key); err != nil || !info.Held || info.Mode != driver.Shared || info.Value != "" || info.Token != l.Token() {
		t.Errorf("one reader: %+v, %v; want a shared hold with token %d and no value", info, err, l.Token())
	}
	mustRelease(t, l)
}
