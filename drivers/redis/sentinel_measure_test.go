package redis

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// EnvSentinelTrials names the environment variable that runs
// TestSentinelDoubleGrants with that many forced failovers per setting.
const EnvSentinelTrials = "DLOCK_SENTINEL_TRIALS"

// TestSentinelDoubleGrants measures, rather than asserts, what replica
// acknowledgements buy and cost on a master with 2 replicas and 3
// sentinels: the median Lock+Unlock with and without replica_acks=2,
// and how many locks a forced failover (SENTINEL FAILOVER) grants twice.
// In each trial one client takes new locks as fast as it can while the
// sentinels promote a replica; once the deployment has settled, a second
// client, connected to the new master, tries every lock the first still
// believes it holds. A lock it gets is a double grant. It runs only with
// DLOCK_SENTINEL_TRIALS=N, and reports its figures with t.Log.
func TestSentinelDoubleGrants(t *testing.T) {
	trials, _ := strconv.Atoi(os.Getenv(EnvSentinelTrials))
	if trials < 1 {
		t.Skipf("a measurement: set %s=N (forced failovers per setting) to run it", EnvSentinelTrials)
	}
	server.Need(t)
	if !server.Faults() {
		t.Skip("the measurement starts containers of its own")
	}
	s := &sentinelEnv{r: testserver.Own(t, testserver.StartTimeout, func(ctx context.Context) (*testserver.RedisSentinel, error) {
		return testserver.StartRedisSentinel(ctx, 2, 3)
	})}
	for _, params := range []string{"", "replica_acks=2"} {
		p50 := s.medianLockUnlock(t, params, 500)
		var grants, doubles []int
		for range trials {
			g, d := s.failoverTrial(t, params)
			grants, doubles = append(grants, g), append(doubles, d)
		}
		t.Logf("URL parameters %q: median Lock+Unlock %v; double grants per failover %v, among grants during it %v",
			params, p50, doubles, grants)
	}
}

// medianLockUnlock returns the median time of n Lock+Unlock rounds of one
// client on one key.
func (s *sentinelEnv) medianLockUnlock(t *testing.T, params string, n int) time.Duration {
	if _, err := s.r.WaitSettled(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	c := s.client(t, params)
	m, err := c.Mutex(testkit.Key(t))
	if err != nil {
		t.Fatal(err)
	}
	times := make([]time.Duration, n)
	for i := range times {
		start := time.Now()
		l, err := m.Lock(ctxFor(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctxFor(t)); err != nil {
			t.Fatal(err)
		}
		times[i] = time.Since(start)
	}
	slices.Sort(times)
	return times[n/2]
}

// failoverTrial forces one failover while a client takes locks, and
// returns how many it was granted meanwhile and how many of those, still
// held as far as it knows, a client of the new master is granted too.
func (s *sentinelEnv) failoverTrial(t *testing.T, params string) (grants, doubles int) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	old, err := s.r.WaitSettled(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A TTL far longer than the trial: the holder renews no lease (and so
	// learns of no loss) before the check.
	const ttl = 60 * time.Second
	holder := s.client(t, params, dlock.WithTTL(ttl))
	prefix := testkit.Key(t)
	var mu sync.Mutex
	var held []dlock.Lease
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			m, err := holder.Mutex(fmt.Sprintf("%s/%d", prefix, i))
			if err != nil {
				t.Error(err)
				return
			}
			tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			l, err := m.TryLock(tctx)
			cancel()
			if err == nil {
				mu.Lock()
				held = append(held, l)
				mu.Unlock()
			}
			// A pace, not a synchronisation: a few hundred grants a
			// second is enough to land some in the failover's window.
			time.Sleep(2 * time.Millisecond)
		}
	})

	sc := goredis.NewSentinelClient(&goredis.Options{Addr: s.r.Sentinels[0].Addr(), MaintNotificationsConfig: maintOff()})
	defer sc.Close()
	for {
		// Refused while the last failover's replicas are still being
		// reconfigured (INPROG, NOGOODSLAVE): asked again.
		if err := sc.Failover(ctx, testserver.SentinelMasterName).Err(); err == nil {
			break
		} else if ctx.Err() != nil {
			close(stop)
			wg.Wait()
			t.Fatalf("SENTINEL FAILOVER: %v", err)
		}
		time.Sleep(200 * time.Millisecond) // the sentinel's own pace, not synchronisation
	}
	for {
		if m, err := s.r.Master(ctx); err == nil && m != old {
			break
		}
		if ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling the sentinels
	}
	_, err = s.r.WaitSettled(ctx)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}

	other := s.client(t, "", dlock.WithTTL(ttl))
	for _, l := range held {
		if l.Err() != nil {
			continue // the holder knows it lost it
		}
		m, err := other.Mutex(l.Key())
		if err != nil {
			t.Fatal(err)
		}
		l2, err := m.TryLock(ctxFor(t))
		switch {
		case err == nil:
			doubles++
			_ = l2.Unlock(ctxFor(t))
		case !errors.Is(err, dlock.ErrLocked):
			t.Fatalf("TryLock on the new master: %v", err)
		}
	}
	for _, l := range held {
		_ = l.Unlock(ctxFor(t))
	}
	_ = holder.Close(ctxFor(t))
	_ = other.Close(ctxFor(t))
	return len(held), doubles
}
