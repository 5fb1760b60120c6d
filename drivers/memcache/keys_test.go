package memcache

import (
	"errors"
	"strings"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

// hostileKeys are dlock keys that would break a driver passing them to
// memcached as they are.
func hostileKeys() []string {
	return []string{
		" ", "a b", "a\r\nflush_all", "a\r\nflush_all\r\n", "x 0 0 1\r\nz\r\nflush_all",
		"a\r\n", "\r\n", "a\nb", "a\tb", "a\x00b", "\x00", "\x7f", "\x01\x02",
		"\xff\xfe\xfd", "日本語", "a#b", "a.fence", "#", "dlock:x",
		strings.Repeat("x", 250), strings.Repeat("x", 251), strings.Repeat("x", 1000),
		strings.Repeat("x", 1024), strings.Repeat("\xff", 1024), strings.Repeat(" ", 1024),
		strings.Repeat("x", 64) + "a", strings.Repeat("x", 64) + "b", // same readable part
	}
}

func TestNamesAreLegalAndDistinct(t *testing.T) {
	seen := map[string]string{}
	for _, prefix := range []string{DefaultKeyPrefix, "", strings.Repeat("p", maxPrefixLen)} {
		for _, k := range append(hostileKeys(), "reports/nightly", "a", "b") {
			n := namesOf(prefix, k)
			for _, name := range []string{n.lock, n.fence, n.next, n.served} {
				if !legalMemcachedKey(name) {
					t.Errorf("namesOf(%q, %q) = %q: not a legal memcached key", prefix, k, name)
				}
				if other, dup := seen[name]; dup {
					t.Errorf("namesOf(%q, %q) = %q, the same as for %s", prefix, k, name, other)
				}
				seen[name] = prefix + "|" + k
			}
		}
	}
	if got, want := namesOf(DefaultKeyPrefix, "reports/nightly").lock, "dlock:reports/nightly#"; !strings.HasPrefix(got, want) || len(got) != len(want)+43 {
		t.Errorf("lock name of a plain key = %q, want %q followed by 43 hash characters", got, want)
	}
	if got := namesOf("", "a\r\nflush_all").lock[:12]; got != "a__flush_all" {
		t.Errorf("readable part of a CRLF key = %q, want a__flush_all", got)
	}
	longest := namesOf(strings.Repeat("p", maxPrefixLen), strings.Repeat("x", 1024)).served
	if len(longest) != 179 {
		t.Errorf("longest name is %d bytes, want 179", len(longest))
	}
}

func FuzzNames(f *testing.F) {
	for _, k := range hostileKeys() {
		f.Add(DefaultKeyPrefix, k)
	}
	f.Fuzz(func(t *testing.T, prefix, key string) {
		if checkPrefix(prefix) != nil {
			return
		}
		n := namesOf(prefix, key)
		if !legalMemcachedKey(n.lock) || !legalMemcachedKey(n.fence) || !legalMemcachedKey(n.next) || !legalMemcachedKey(n.served) {
			t.Fatalf("namesOf(%q, %q) = %+v: not legal memcached keys", prefix, key, n)
		}
		if n.lock == n.fence || !strings.HasPrefix(n.lock, prefix) {
			t.Fatalf("namesOf(%q, %q) = %+v", prefix, key, n)
		}
		// A different key under the same prefix gets other names.
		if o := namesOf(prefix, key+"\x00"); o.lock == n.lock || o.fence == n.lock || o.lock == n.fence {
			t.Fatalf("namesOf(%q, %q) and of the key with a NUL appended collide: %+v %+v", prefix, key, n, o)
		}
	})
}

// Hostile keys lock as distinct locks, and the server only ever sees
// well-formed requests: nothing else on it is touched (no flush, a sentinel
// item survives).
func TestHostileKeys(t *testing.T) {
	var w wire
	d1 := newTestDriver(t, w.client(t, server.URL))
	d2 := newTestDriver(t, w.client(t, server.URL))
	mc := newMC(t)
	addr := serverAddrs(t, server.URL)[0]
	sentinel := &gomemcache.Item{Key: "sentinel-" + testkit.NewID(), Value: []byte("keep me"), Expiration: 60}
	if err := mc.Set(sentinel); err != nil {
		t.Fatal(err)
	}
	flushes := stat(t, addr, "cmd_flush")

	keys := hostileKeys()
	var leases []driver.Lease
	for _, key := range testkit.RunKeys(t, keys) {
		req := driver.Request{Key: key, ID: testkit.NewID(), TTL: testTTL}
		l, err := d1.Acquire(ctxFor(t), req)
		if err != nil {
			t.Fatalf("Acquire(%q): %v", key, err)
		}
		leases = append(leases, l)
		if _, err := d2.Acquire(ctxFor(t), driver.Request{Key: key, ID: testkit.NewID(), TTL: testTTL}); !errors.Is(err, driver.ErrLocked) {
			t.Fatalf("Acquire(%q) while held: got %v, want ErrLocked", key, err)
		}
		if err := l.Extend(ctxFor(t), testTTL+time.Second); err != nil {
			t.Fatalf("Extend(%q): %v", key, err)
		}
	}
	for i, l := range leases {
		if err := l.Release(ctxFor(t)); err != nil {
			t.Fatalf("Release of hostile key %d (%q): %v", i, keys[i], err)
		}
	}
	for _, p := range w.problems() {
		t.Errorf("malformed request sent: %s", p)
	}
	if w.requests.Load() == 0 {
		t.Fatal("no requests seen")
	}
	if got := stat(t, addr, "cmd_flush"); got != flushes {
		t.Errorf("cmd_flush went from %d to %d: a key injected a flush_all", flushes, got)
	}
	if it, err := mc.Get(sentinel.Key); err != nil || string(it.Value) != "keep me" {
		t.Errorf("the sentinel item after the hostile keys: %v %v", it, err)
	}
}
