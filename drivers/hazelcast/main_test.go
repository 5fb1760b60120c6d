package hazelcast

import (
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// server is the Hazelcast cluster of the tests: the one
// DLOCK_TEST_HAZELCAST_URL names, or a container of dlock-test/hazelcast
// (built by testenv/setup). The tests skip, with one line saying why, only
// when setup could not fetch the member from Maven Central (see
// testserver.HazelcastMain).
var server testserver.Target

func TestMain(m *testing.M) { testserver.HazelcastMain(m, &server) }

// ctxFor returns a context bounded for one test step.
var ctxFor = testkit.ContextFor(30 * time.Second)

// testTTL is the TTL of the tests: long enough that no lease ends by itself
// during a test, which ends leases with a force-unlock instead.
const testTTL = 10 * time.Second

// mustAcquire takes key on d or fails tb.
func mustAcquire(tb testing.TB, d *Driver, key string) *lease {
	tb.Helper()
	l, err := d.Acquire(ctxFor(tb), testkit.Request(key, testTTL))
	if err != nil {
		tb.Fatalf("Acquire(%q): %v", key, err)
	}
	return l.(*lease)
}

// testClock is a clock the tests move by hand, for the Driver's timing checks
// and its fencing floor.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

// useTestClock makes d read the time from a new testClock, which it returns.
func useTestClock(d *Driver) *testClock {
	c := &testClock{now: time.Now()}
	d.now = c.read
	return c
}

func (c *testClock) read() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
