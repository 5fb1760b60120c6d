package memcache

import (
	"context"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

// newInspectingDriver returns a Driver that knows its client's selector
// (so it inspects), with that client, closed when tb ends.
func newInspectingDriver(tb testing.TB) (*Driver, *gomemcache.Client) {
	tb.Helper()
	server.Need(tb)
	mc, sel := newMCSelAt(tb, server.URL)
	return newTestDriver(tb, mc, WithSelector(sel)), mc
}

// inspect inspects key on d, or fails t.
func inspect(t *testing.T, d *Driver, key string) driver.Info {
	t.Helper()
	info, err := d.Inspect(ctxFor(t), key)
	if err != nil {
		t.Fatalf("Inspect(%q): %v", key, err)
	}
	return info
}

// wantHolder fails t unless info describes the hold of req, whose lease is
// l, with token (0 for not recorded yet).
func wantHolder(t *testing.T, info driver.Info, req driver.Request, token uint64) {
	t.Helper()
	if !info.Held || info.Mode != driver.Exclusive || info.Holders != 1 || info.Owner != req.ID ||
		info.Token != token || info.Value != req.Value || info.Waiters != -1 ||
		info.TTL <= 0 || info.TTL > req.TTL {
		t.Fatalf("Inspect = %+v, want held by %s with value %q, token %d, TTL in (0, %v], waiters unknown",
			info, req.ID, req.Value, token, req.TTL)
	}
}

func TestInspectCapabilities(t *testing.T) {
	d, _ := newInspectingDriver(t)
	if c := d.Capabilities(); c.Inspector == nil || !c.Values {
		t.Errorf("with a selector: Inspector %v, Values %v; want both", c.Inspector, c.Values)
	}
	if c := newTestDriver(t, newMC(t)).Capabilities(); c.Inspector != nil || c.Values {
		t.Errorf("without a selector: Inspector %v, Values %v; want neither (no meta commands)", c.Inspector, c.Values)
	}
}

// TestInspectValue: a hold's value and token are in its lock item from the
// grant on, through renewals, and gone with the release.
func TestInspectValue(t *testing.T) {
	d, _ := newInspectingDriver(t)
	other, _ := newInspectingDriver(t)
	key := testkit.Key(t)
	if info := inspect(t, other, key); info != (driver.Info{Waiters: -1}) {
		t.Fatalf("Inspect of a free lock = %+v, want not held, waiters unknown", info)
	}
	req := reqFor(key)
	req.Value = "node-1 at 10.0.0.1:8080 ∑"
	l := mustAcquire(t, d, req)
	wantHolder(t, inspect(t, other, key), req, l.Token())
	if err := l.Extend(ctxFor(t), testTTL); err != nil {
		t.Fatal(err)
	}
	wantHolder(t, inspect(t, other, key), req, l.Token())
	// The batch renewal keeps them too.
	if errs := d.ExtendBatch(ctxFor(t), []driver.Lease{l}, []time.Duration{testTTL}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	wantHolder(t, inspect(t, other, key), req, l.Token())
	if err := l.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	if info := inspect(t, other, key); info.Held || info.Value != "" {
		t.Fatalf("Inspect after Release = %+v, want not held", info)
	}

	// The next holder's value and token replace them.
	req2 := reqFor(key)
	req2.Value = "node-2"
	l2 := mustAcquire(t, other, req2)
	defer l2.Release(context.Background())
	if l2.Token() <= l.Token() {
		t.Fatalf("second token %d, want above %d", l2.Token(), l.Token())
	}
	wantHolder(t, inspect(t, d, key), req2, l2.Token())
}

// TestInspectPlainLock: a lock without a value keeps the item's first form
// until its first renewal records its token.
func TestInspectPlainLock(t *testing.T) {
	d, mc := newInspectingDriver(t)
	key := testkit.Key(t)
	req := reqFor(key)
	l := mustAcquire(t, d, req)
	defer l.Release(context.Background())
	wantHolder(t, inspect(t, d, key), req, 0)
	it, err := mc.Get(namesOf(DefaultKeyPrefix, key).lock)
	if err != nil || string(it.Value[:len(valueTag)]) != valueTag {
		t.Fatalf("lock item %q, %v: want the dlock1 form", it.Value, err)
	}
	if err := l.Extend(ctxFor(t), testTTL); err != nil {
		t.Fatal(err)
	}
	wantHolder(t, inspect(t, d, key), req, l.Token())
}

// TestInspectValueExpires: a hold whose holder stops renewing leaves with
// its value when its item expires.
func TestInspectValueExpires(t *testing.T) {
	d, _ := newInspectingDriver(t)
	key := testkit.Key(t)
	req := reqFor(key)
	req.Value = "short-lived"
	l := mustAcquire(t, d, req)
	wantHolder(t, inspect(t, d, key), req, l.Token())
	// memcached drops the item at most the TTL (whole seconds, plus its
	// clock's tick) after the add; the bound leaves room for a slow machine.
	deadline := time.Now().Add(testTTL + 5*time.Second)
	for {
		info := inspect(t, d, key)
		if !info.Held {
			if info.Value != "" || info.Token != 0 {
				t.Fatalf("Inspect of an expired lock = %+v", info)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still held at the deadline: %+v", info)
		}
		time.Sleep(50 * time.Millisecond) // polling the server, which cannot be watched
	}
	if err := l.Extend(ctxFor(t), testTTL); err == nil {
		t.Fatal("Extend after expiry succeeded")
	}
}

// TestInspectOtherItems: items of the first form (earlier versions), items
// whose token was never recorded, and items the driver did not write.
func TestInspectOtherItems(t *testing.T) {
	d, mc := newInspectingDriver(t)
	key := testkit.Key(t)
	name := namesOf(DefaultKeyPrefix, key).lock
	set := func(v []byte) {
		t.Helper()
		if err := mc.Set(&gomemcache.Item{Key: name, Value: v, Expiration: 60}); err != nil {
			t.Fatal(err)
		}
	}
	set(encodeValue(holding{id: "old", expires: time.Now().Add(time.Minute)}))
	if info := inspect(t, d, key); !info.Held || info.Owner != "old" || info.Token != 0 || info.Value != "" {
		t.Errorf("Inspect of a dlock1 item = %+v, want held by old, token and value unknown", info)
	}
	// A holder that died between its add and the rewrite: after waiting
	// for the rewrite (the client's Timeout), held with no token and no
	// value (a value is only ever reported with its grant's token).
	set(encodeValue(holding{id: "died", expires: time.Now().Add(time.Minute), value: "v"}))
	if info := inspect(t, d, key); !info.Held || info.Owner != "died" || info.Token != 0 || info.Value != "" {
		t.Errorf("Inspect of an unsettled item = %+v, want held by died, token and value unknown", info)
	}
	set([]byte("not a lock"))
	if info := inspect(t, d, key); !info.Held || info.Owner != "" || info.Token != 0 || info.Value != "" {
		t.Errorf("Inspect of a foreign item = %+v, want held by nobody known", info)
	}
}

// TestElection runs dlock's leader election over two Drivers
// (testkit.ElectionRoundTrip).
func TestElection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	da, _ := newInspectingDriver(t)
	db, _ := newInspectingDriver(t)
	ca := testkit.Client(t, da, dlock.WithTTL(testTTL))
	cb := testkit.Client(t, db, dlock.WithTTL(testTTL))
	testkit.ElectionRoundTrip(t, ctx, ca, cb, testkit.Key(t))
}
