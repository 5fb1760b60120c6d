package zookeeper

import (
	"crypto/rand"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

// testBase returns a base path no other test uses.
func testBase() string { return "/t-" + rand.Text()[:10] }

// serverAddr returns the first server of the test URL.
func serverAddr(tb testing.TB) string {
	tb.Helper()
	servers, _, err := parseURL(testkit.URL(tb, testURL(tb, "")))
	if err != nil {
		tb.Fatal(err)
	}
	return servers[0]
}

// dialAddr opens a Driver on the servers at addr with the tests' session
// timeout and the given base path, closed when tb ends.
func dialAddr(tb testing.TB, addr, base string) *Driver {
	tb.Helper()
	return dialSession(tb, addr, base, testSession)
}

// dialSession is dialAddr with another session timeout, for tests whose
// work or faults need a longer one than testSession.
func dialSession(tb testing.TB, addr, base string, session time.Duration) *Driver {
	tb.Helper()
	return dial(tb, "zk://"+addr+"/dlock-test"+base+"?"+sessionTTLParam+"="+session.String())
}

// children lists the queue and entry nodes of key under base, through conn.
func children(tb testing.TB, conn *zk.Conn, base, key string) []string {
	tb.Helper()
	names, _, err := conn.Children("/dlock-test" + base + "/" + escapeKey(key))
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		tb.Fatalf("Children: %v", err)
	}
	slices.Sort(names)
	return names
}

// waitUntil polls cond (observing the server, which cannot be subscribed to)
// until it holds, failing tb after d.
func waitUntil(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("%s did not happen within %v", what, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func request(key string, mode driver.Mode) driver.Request {
	return driver.Request{Key: key, ID: testkit.NewID(), TTL: testSession, Mode: mode}
}

// block makes req a blocking one: it waits in the lock's queue.
func block(req driver.Request) driver.Request {
	req.Block = true
	return req
}

// TestTTLLimits checks the TTL range the Driver declares (one to two session
// timeouts) and that the core applies it.
func TestTTLLimits(t *testing.T) {
	conn := rawConn(t)
	d, err := New(conn, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	caps := d.Capabilities()
	if caps.MinTTL != 10*time.Second || caps.MaxTTL != 20*time.Second || caps.TTLReason == "" {
		t.Errorf("Capabilities: MinTTL %v, MaxTTL %v, TTLReason %q; want 10s, 20s and a reason", caps.MinTTL, caps.MaxTTL, caps.TTLReason)
	}
	c := testkit.Client(t, d)
	for ttl, ok := range map[time.Duration]bool{
		time.Second: false, 9 * time.Second: false, 10 * time.Second: true, 15 * time.Second: true,
		20 * time.Second: true, 21 * time.Second: false,
	} {
		_, err := c.Mutex("k", dlock.WithTTL(ttl))
		if ok && err != nil {
			t.Errorf("Mutex with TTL %v and a 10 s session: %v", ttl, err)
		}
		if !ok && !errors.Is(err, dlock.ErrInvalidTTL) {
			t.Errorf("Mutex with TTL %v and a 10 s session: got %v, want ErrInvalidTTL", ttl, err)
		}
	}
	if _, err := c.Mutex("k"); err != nil {
		t.Errorf("Mutex with the default TTL (15 s) and a 10 s session: %v", err)
	}
}

// TestNegotiatedTimeout checks that Dial uses the session timeout the server
// grants, not the one it asked for: the test server grants at most 300 ticks.
func TestNegotiatedTimeout(t *testing.T) {
	server.NeedFaults(t) // the container's limits are known
	d := dial(t, "zk://"+serverAddr(t)+"/dlock-test?session_timeout=1h")
	if got, want := d.SessionTTL(), time.Minute; got != want {
		t.Errorf("SessionTTL after asking for 1h: %v, want the server's maximum %v", got, want)
	}
	d = dial(t, "zk://"+serverAddr(t)+"/dlock-test?session_timeout=100ms")
	if got, want := d.SessionTTL(), 400*time.Millisecond; got != want {
		t.Errorf("SessionTTL after asking for 100ms: %v, want the server's minimum %v", got, want)
	}
}

// TestHerd: each release wakes exactly the waiter it lets in, however many
// wait (pattern 6 of the reference's broken locks is every waiter watching
// the directory, and waking on every change).
func TestHerd(t *testing.T) {
	const waiters = 50
	// The first holder keeps the lock, unrenewed, while 50 Drivers dial and
	// queue: many seconds under -race on a loaded machine, so the sessions
	// and the leases here last far longer than the tests' usual 2 s, which
	// let the first lease lapse and the queue move before it was full.
	// Wake-ups are what this test is about, not expiry.
	const session = 30 * time.Second
	herdRequest := func(key string) driver.Request {
		r := request(key, driver.Exclusive)
		r.TTL = session
		return r
	}
	base, key := testBase(), "herd"
	conn := rawConn(t)
	holder := dialSession(t, serverAddr(t), base, session)
	first, err := holder.Acquire(ctxFor(t), herdRequest(key))
	if err != nil {
		t.Fatal(err)
	}
	drivers := make([]*Driver, waiters)
	type grant struct {
		i int
		l driver.Lease
	}
	granted := make(chan grant, waiters)
	errs := make(chan error, waiters)
	var wg sync.WaitGroup
	for i := range drivers {
		drivers[i] = dialSession(t, serverAddr(t), base, session)
		wg.Go(func() {
			l, err := drivers[i].Acquire(ctxFor(t), block(herdRequest(key)))
			if err != nil {
				errs <- err
				return
			}
			granted <- grant{i, l}
		})
	}
	waitUntil(t, 30*time.Second, "every waiter queued", func() bool {
		select {
		case err := <-errs:
			t.Fatalf("waiter: %v", err)
		default:
		}
		return len(children(t, conn, base, key)) == waiters+1
	})
	wakeups := func() (total int64, per []int64) {
		for _, d := range drivers {
			n := d.stats.wakeups.Load()
			per = append(per, n)
			total += n
		}
		return total, per
	}
	if total, _ := wakeups(); total != 0 {
		t.Fatalf("%d wake-ups before any release", total)
	}
	var holding driver.Lease = first
	for n := 1; n <= waiters; n++ {
		if err := holding.Release(ctxFor(t)); err != nil {
			t.Fatalf("release %d: %v", n, err)
		}
		var g grant
		select {
		case g = <-granted:
		case err := <-errs:
			t.Fatalf("waiter: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatalf("release %d woke nobody", n)
		}
		holding = g.l // hand over from the waiter that got the lock
	}
	wg.Wait()
	total, per := wakeups()
	if total != waiters {
		t.Errorf("%d releases caused %d wake-ups, want exactly one each; per waiter: %v", waiters, total, per)
	}
	for i, n := range per {
		if n != 1 {
			t.Errorf("waiter %d woke %d times, want once", i, n)
		}
	}
}
