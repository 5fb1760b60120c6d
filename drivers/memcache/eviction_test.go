package memcache

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// smallServer starts a memcached container of its own with 2 MB of item
// memory (memcached's least with its default 1 MB item limit) and extra
// args, terminated when tb ends, and returns its URL.
func smallServer(tb testing.TB, args ...string) string {
	tb.Helper()
	server.NeedFaults(tb) // containers can be started here
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := testserver.StartMemcached(ctx, append([]string{"--memory-limit=2"}, args...)...)
	if err != nil {
		tb.Fatalf("start a small memcached: %v", err)
	}
	tb.Cleanup(func() {
		if err := srv.Terminate(context.Background()); err != nil {
			tb.Error(err)
		}
	})
	return "memcache://" + srv.Addr()
}

// fill stores n items shaped like the lock item named like whose value
// names an ID of idLen bytes (same key and value lengths, so the same slab
// class) on the server at addr, pipelined without replies, and then one more
// with a reply, which it returns.
func fill(tb testing.TB, addr, like string, idLen, round, n int) string {
	tb.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		tb.Fatalf("fill: %v", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	value := encodeValue(holding{id: strings.Repeat("f", idLen), expires: time.Now()})
	w := bufio.NewWriter(c)
	for i := range n + 1 {
		key := fmt.Sprintf("%s%03d%07d", like[:len(like)-10], round%1000, i)
		reply := " noreply"
		if i == n {
			reply = ""
		}
		fmt.Fprintf(w, "set %s 0 0 %d%s\r\n%s\r\n", key, len(value), reply, value)
	}
	if err := w.Flush(); err != nil {
		tb.Fatalf("fill: %v", err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		tb.Fatalf("fill: %v", err)
	}
	return strings.TrimRight(line, "\r\n")
}

// A lock item evicted under memory pressure is a lost lock: the next renewal
// finds it gone, and the holder's lost signal fires.
func TestEvictionLosesLock(t *testing.T) {
	url := smallServer(t)
	addr := serverAddrs(t, url)[0]
	mc := newMCAt(t, url)
	key := testkit.Key(t)
	name := namesOf(DefaultKeyPrefix, key).lock

	// Driver level: the Extend after the eviction refuses.
	d := newTestDriver(t, mc)
	req := reqFor(key)
	l := mustAcquire(t, d, req)
	fill(t, addr, name, len(req.ID), 0, 60000) // five times what 2 MB holds
	if n := stat(t, addr, "evictions"); n == 0 {
		t.Fatal("no evictions after the fill")
	}
	if err := l.Extend(ctxFor(t), testTTL); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("Extend of an evicted lock: got %v, want ErrNotHeld", err)
	}

	// Through the core: the lost signal fires at the renewal after the
	// eviction. Renewal reads and rewrites the item, which protects it in
	// memcached's LRU, so fill until it is gone.
	c := testkit.Client(t, newTestDriver(t, newMCAt(t, url)), dlock.WithTTL(testTTL))
	m := testkit.Mutex(t, c, key)
	lease := testkit.Lock(t, ctxFor(t), m)
	deadline := time.Now().Add(30 * time.Second)
	for round := 1; ; round++ {
		fill(t, addr, name, 32, round, 60000) // the core's IDs are 32 hex digits
		select {
		case <-lease.Done():
		case <-time.After(testTTL / 2): // past a renewal (every TTL/3)
			if time.Now().After(deadline) {
				t.Fatal("the lock survived 30 s of filling")
			}
			continue
		}
		t.Logf("the lock was lost after %d fills of 60000 items", round)
		break
	}
	if err := lease.Err(); !errors.Is(err, dlock.ErrLockLost) || !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Err of an evicted lease: got %v, want ErrLockLost from a refused renewal", err)
	}
}

// With evictions disabled (-M), a full server keeps the lock and refuses
// new items with an error: renewals and grants fail visibly, nothing is
// lost silently.
func TestNoEvictionWithDisableEvictions(t *testing.T) {
	url := smallServer(t, "--disable-evictions")
	addr := serverAddrs(t, url)[0]
	mc := newMCAt(t, url)
	d := newTestDriver(t, mc)
	key := testkit.Key(t)
	req := reqFor(key)
	// Filling the server takes seconds on a loaded machine, longer than the
	// 2.9 s that MinTTL guarantees: the lock must not expire meanwhile,
	// since its expiry would look like the eviction this test rules out.
	req.TTL = time.Minute
	l := mustAcquire(t, d, req)
	if got := fill(t, addr, namesOf(DefaultKeyPrefix, key).lock, len(req.ID), 0, 60000); !strings.Contains(got, "out of memory") {
		t.Fatalf("the last store of the fill: got %q, want SERVER_ERROR out of memory", got)
	}
	if n := stat(t, addr, "evictions"); n != 0 {
		t.Fatalf("%d evictions with evictions disabled", n)
	}
	it, err := mc.Get(namesOf(DefaultKeyPrefix, key).lock)
	if err != nil || !heldBy(it.Value, req.ID) {
		t.Fatalf("the lock item on the full server: %v %v, want it kept", it, err)
	}
	err = l.Extend(ctxFor(t), req.TTL)
	if err != nil && (errors.Is(err, driver.ErrNotHeld) || !strings.Contains(err.Error(), "out of memory")) {
		t.Fatalf("Extend on the full server: got %v, want success or SERVER_ERROR out of memory", err)
	}
	other := testkit.Key(t)
	if _, err := d.Acquire(ctxFor(t), reqFor(other)); err == nil || errors.Is(err, driver.ErrLocked) {
		t.Fatalf("Acquire on the full server: got %v, want an out of memory error", err)
	}
	if id, _ := holderOf(t, mc, other); id != "" {
		t.Fatalf("the refused Acquire left a lock naming %q", id)
	}
}
