package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// clusterTTL is the session and lock TTL of the cluster tests: the shortest
// lease a cluster with etcd's default timing grants (1.5 election timeouts,
// rounded up to whole seconds).
const clusterTTL = 2 * time.Second

// TestCluster runs a 3-member cluster (three containers on a Docker network
// of their own, static --initial-cluster) and breaks its members while locks
// are held and waited for. It takes about a minute.
func TestCluster(t *testing.T) {
	server.NeedFaults(t) // needs Docker, not an external cluster
	c := testserver.Own(t, 3*time.Minute, func(ctx context.Context) (*testserver.EtcdCluster, error) {
		return testserver.StartEtcdCluster(ctx, 3)
	})
	t.Run("LeaderKilled", func(t *testing.T) { testLeaderKilled(t, c) })
	t.Run("FollowerFrozen", func(t *testing.T) { testMemberFrozen(t, c, false) })
	t.Run("LeaderFrozen", func(t *testing.T) { testMemberFrozen(t, c, true) })
}

// openCluster returns a dlock Client of the members at addrs, closed when t
// ends.
func openCluster(t *testing.T, addrs ...string) *dlock.Client {
	t.Helper()
	url := "etcd://"
	for i, a := range addrs {
		if i > 0 {
			url += ","
		}
		url += a
	}
	url += fmt.Sprintf("?session_ttl=%v", clusterTTL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := dlock.Open(ctx, url, dlock.WithTTL(clusterTTL))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.Close(ctx)
	})
	return client
}

// section is the resource the cluster tests' locks protect: it counts the
// holders inside, who enter only while their lease is valid, and checks
// fencing tokens as a fenced resource would.
type section struct {
	mu         sync.Mutex
	inside     int
	last       uint64
	entered    atomic.Int64
	violations []string
}

// enter lets l's holder in, if its lease is still valid and its token is
// not stale; it reports whether it did.
func (s *section) enter(l dlock.Lease) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.Err() != nil || !time.Now().Before(l.Deadline()) {
		return false // a careful holder checks before acting
	}
	if s.inside > 0 {
		s.violations = append(s.violations, fmt.Sprintf("token %d entered while %d holder(s) were inside", l.Token(), s.inside))
	}
	if l.Token() <= s.last {
		s.violations = append(s.violations, fmt.Sprintf("stale token %d after %d", l.Token(), s.last))
	}
	s.last = max(s.last, l.Token())
	s.inside++
	s.entered.Add(1)
	return true
}

func (s *section) leave() {
	s.mu.Lock()
	s.inside--
	s.mu.Unlock()
}

func (s *section) check(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.violations {
		t.Error(v)
	}
}

// progress waits until n more sections than now have been entered.
func (s *section) progress(t *testing.T, n int64, within time.Duration, what string) {
	t.Helper()
	want := s.entered.Load() + n
	deadline := time.Now().Add(within)
	for s.entered.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d sections within %v, want %d", what, s.entered.Load()-want+n, within, n)
		}
		time.Sleep(10 * time.Millisecond) // observing workers, not synchronising
	}
}

// testLeaderKilled kills the leader (SIGKILL) while four clients contend
// for a lock and a fifth holds another one that a sixth waits for: mutual
// exclusion and fencing must hold throughout, the contention must go on
// under the new leader, and the long-held lock must either stay held (no
// one else gets it) or be reported lost before anyone else gets it.
func testLeaderKilled(t *testing.T, c *testserver.EtcdCluster) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	key, heldKey := testkit.Key(t), testkit.Key(t)
	var hot section
	var wg sync.WaitGroup
	var lockErrs, lost atomic.Int64
	for range 4 {
		client := openCluster(t, c.Addrs()...)
		m := testkit.Mutex(t, client, key)
		for range 2 {
			wg.Go(func() {
				for ctx.Err() == nil {
					l, err := m.Lock(ctx)
					if err != nil {
						if ctx.Err() == nil {
							lockErrs.Add(1) // e.g. the session lost while waiting
							time.Sleep(50 * time.Millisecond)
						}
						continue
					}
					if hot.enter(l) {
						time.Sleep(time.Millisecond) // the work
						hot.leave()
					}
					if err := l.Unlock(context.Background()); errors.Is(err, dlock.ErrLockLost) {
						lost.Add(1)
					}
				}
			})
		}
	}

	// The long-held lock and its waiter.
	holder, err := openCluster(t, c.Addrs()...).Mutex(heldKey)
	if err != nil {
		t.Fatal(err)
	}
	held := testkit.Lock(t, ctx, holder)
	waiterM, err := openCluster(t, c.Addrs()...).Mutex(heldKey)
	if err != nil {
		t.Fatal(err)
	}
	waited := contend(t, ctx, waiterM, held)

	hot.progress(t, 20, 30*time.Second, "contention before the failure")
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("killing member %d, the leader", leader)
	if err := c.Kill(ctx, leader); err != nil {
		t.Fatal(err)
	}
	hot.progress(t, 20, 30*time.Second, "contention after the leader was killed")
	if err := c.Members[leader].Start(ctx); err != nil {
		t.Fatal(err)
	}
	hot.progress(t, 20, 30*time.Second, "contention after the member came back")

	// The long-held lock: kept, or lost before the waiter got it.
	select {
	case g := <-waited:
		if g.err != nil {
			t.Fatalf("waiter: %v", g.err)
		}
		if !g.heldLost {
			t.Errorf("the waiter got the lock while its holder had not been told it lost it")
		}
		t.Logf("the long-held lock was lost in the failover (%v), and then granted to the waiter", held.Err())
		_ = g.l.Unlock(ctx)
	default:
		if err := held.Err(); err != nil {
			t.Logf("the long-held lock was lost (%v); its waiter has not got it yet", err)
		} else {
			t.Logf("the long-held lock survived the failover")
		}
		_ = held.Unlock(ctx)
		select {
		case g := <-waited:
			if g.err != nil {
				t.Fatalf("waiter: %v", g.err)
			}
			_ = g.l.Unlock(ctx)
		case <-time.After(2*clusterTTL + slack):
			t.Errorf("the waiter did not get the lock after its holder unlocked")
		}
	}
	cancel()
	wg.Wait()
	hot.check(t)
	t.Logf("%d critical sections, %d Lock errors, %d leases found lost at Unlock", hot.entered.Load(), lockErrs.Load(), lost.Load())
}

// testMemberFrozen freezes the one member a holder is connected to, longer
// than the session TTL: the holder's keepalives hang, so it must be told it
// lost the lock before a contender connected to the other members gets it
// (which happens once the leader expires the holder's lease). With
// leaderToo, the frozen member is the leader, so the others elect a new one
// first. Afterwards the holder's client works again.
func testMemberFrozen(t *testing.T, c *testserver.EtcdCluster, leaderToo bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // bounds the whole test, recovery included
	defer cancel()
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	frozen := (leader + 1) % len(c.Members)
	if leaderToo {
		frozen = leader
	}
	var others []string
	for i, m := range c.Members {
		if i != frozen {
			others = append(others, m.Addr())
		}
	}
	key := testkit.Key(t)
	holderClient := openCluster(t, c.Members[frozen].Addr())
	hm := testkit.Mutex(t, holderClient, key)
	held := testkit.Lock(t, ctx, hm)
	cm, err := openCluster(t, others...).Mutex(key)
	if err != nil {
		t.Fatal(err)
	}
	granted := contend(t, ctx, cm, held)

	if err := c.Members[frozen].Pause(ctx); err != nil {
		t.Fatal(err)
	}
	paused := true
	defer func() {
		if paused {
			_ = c.Members[frozen].Resume(context.Background())
		}
	}()
	waitFor(t, "the holder's lease reported uncertain", func() bool {
		return held.Uncertain() != nil || held.Err() != nil
	})
	select {
	case <-held.Done():
	case <-time.After(clusterTTL + slack):
		t.Fatal("no lost signal while the holder's only member was frozen")
	}
	var g grant
	select {
	case g = <-granted:
	case <-time.After(2*clusterTTL + 2*slack):
		t.Fatal("the contender never got the lock of the cut-off holder")
	}
	if g.err != nil {
		t.Fatalf("contender: %v", g.err)
	}
	if !g.heldLost {
		t.Error("the contender got the lock before the cut-off holder was told it lost it")
	}
	if err := held.Err(); !errors.Is(err, dlock.ErrLockLost) {
		t.Errorf("holder's Err: %v, want ErrLockLost", err)
	}
	t.Logf("holder lost the lock: %v", held.Err())

	paused = false
	if err := c.Members[frozen].Resume(ctx); err != nil {
		t.Fatal(err)
	}
	// The contender's own session went through the failover too: with a
	// 2 s TTL an election can outlast what its client could confirm, and
	// then it was told so.
	if err := g.l.Unlock(ctx); err != nil {
		if !errors.Is(err, dlock.ErrLockLost) {
			t.Errorf("contender's Unlock: %v", err)
		}
		t.Logf("the contender's lease did not survive the election: %v", err)
	}
	// The holder's client recovers with a new session, once its member has
	// caught up with the cluster and its gRPC connection is back.
	waitWithin(t, time.Minute, "the cut-off client locking again", func() bool {
		lctx, cancel := context.WithTimeout(ctx, clusterTTL)
		defer cancel()
		l, err := hm.Lock(lctx)
		if err != nil {
			return false
		}
		_ = l.Unlock(ctx)
		return true
	})
}

// grant is how a contender's Lock ended, and whether the lock's earlier
// holder had been told by then that it lost the lock.
type grant struct {
	l        dlock.Lease
	heldLost bool
	err      error
}

// contend locks m in a goroutine of its own, the contender of held's lock,
// and sends how that ended on the channel it returns. A Lock that fails
// while ctx lasts is asked again: the contender's own session did not
// survive the failover (its client could not confirm it in time), or a
// request timed out in it.
func contend(t *testing.T, ctx context.Context, m dlock.Mutex, held dlock.Lease) <-chan grant {
	granted := make(chan grant, 1)
	go func() {
		l, err := m.Lock(ctx)
		for err != nil && ctx.Err() == nil {
			t.Logf("contender: %v; queueing again", err)
			l, err = m.Lock(ctx)
		}
		g := grant{l: l, err: err}
		select {
		case <-held.Done():
			g.heldLost = true
		default:
		}
		granted <- g
	}()
	return granted
}
