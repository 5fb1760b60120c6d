package zookeeper

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
)

// TestEnsemble runs a 3-node ensemble (three containers on a Docker network
// of their own) and breaks it in the ways a production ensemble breaks: the
// leader dies while locks are held and waited for, a follower freezes, and a
// holder's only server freezes briefly and for longer than the session
// timeout. It takes 20 to 60 s (three JVMs start), so -short skips it.
func TestEnsemble(t *testing.T) {
	if testing.Short() {
		t.Skip("the ensemble test starts three servers; run without -short")
	}
	server.NeedFaults(t) // containers can be run
	e := testserver.Own(t, 5*time.Minute, func(ctx context.Context) (*testserver.ZooKeeperEnsemble, error) {
		return testserver.StartZooKeeperEnsemble(ctx, 3)
	})

	t.Run("LeaderStops", func(t *testing.T) { testLeaderStops(t, e) })
	t.Run("FollowerPaused", func(t *testing.T) { testFollowerPaused(t, e) })
	t.Run("HolderServerBlip", func(t *testing.T) { testHolderServerPaused(t, e, testSession/5, false) })
	t.Run("HolderServerPaused", func(t *testing.T) { testHolderServerPaused(t, e, 2*testSession, true) })
}

// ensembleClient opens a client of the members at addrs (all of them when
// addrs is empty), with the tests' session and TTL.
func ensembleClient(t *testing.T, e *testserver.ZooKeeperEnsemble, base string, members ...int) (*dlock.Client, *Driver) {
	t.Helper()
	if len(members) == 0 {
		members = []int{0, 1, 2}
	}
	var addrs []string
	for _, i := range members {
		addrs = append(addrs, e.Members[i].Addr())
	}
	d := dial(t, "zk://"+strings.Join(addrs, ",")+"/dlock-test"+base+"?"+url.Values{sessionTTLParam: {testSession.String()}}.Encode())
	return newClient(t, d), d
}

// holders checks that no two leases overlap: a lease counts as held from
// its grant until it is unlocked or its loss is signalled.
type holders struct {
	mu   sync.Mutex
	held []dlock.Lease
}

// enter records a new grant, and fails t if another lease still counts as
// held.
func (h *holders) enter(t *testing.T, l dlock.Lease) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, o := range h.held {
		select {
		case <-o.Done():
		default:
			t.Errorf("two holders at once: a lease was granted while another (deadline in %v) was neither unlocked nor lost", time.Until(o.Deadline()))
		}
	}
	h.held = append(h.held, l)
}

func testLeaderStops(t *testing.T, e *testserver.ZooKeeperEnsemble) {
	ctx := ctxFor(t)
	base, key := testBase(), "leader-stops"
	var h holders
	hc, _ := ensembleClient(t, e, base)
	hl, err := mutex(t, hc, key).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h.enter(t, hl)
	const waiters = 3
	var wg sync.WaitGroup
	errs := make(chan error, waiters)
	for range waiters {
		c, _ := ensembleClient(t, e, base)
		m := mutex(t, c, key)
		wg.Go(func() {
			l, err := m.Lock(ctx)
			if err != nil {
				errs <- err
				return
			}
			h.enter(t, l)
			// A waiter served around the election may find its connection
			// gone when it unlocks, as the holder may: the Driver removes
			// the node once it is back, and the lease may be lost too.
			err = l.Unlock(ctx)
			if errors.Is(err, ErrDisconnected) || errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, dlock.ErrLockLost) {
				t.Logf("waiter's Unlock during the election: %v", err)
				err = nil
			}
			errs <- err
		})
	}
	leader := mustLeader(t, ctx, e)
	if err := e.Members[leader].Stop(ctx); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	defer func() {
		if err := e.Members[leader].Start(context.Background()); err != nil {
			t.Errorf("restart the old leader: %v", err)
		}
	}()
	waitUntil(t, 60*time.Second, "a new leader", func() bool {
		l := e.Leader(ctx)
		return l >= 0 && l != leader
	})
	t.Logf("new leader elected %v after the old one stopped", time.Since(stopped).Round(time.Millisecond))
	// The holder keeps its lock through the election (its client moves to
	// another member within the session timeout), or is told it lost it.
	waitUntil(t, 3*testSession, "the holder back in touch, or told of its loss", func() bool {
		select {
		case <-hl.Done():
			return true
		default:
			return hl.Uncertain() == nil
		}
	})
	select {
	case <-hl.Done():
		t.Logf("holder lost the lock during the election: %v", hl.Err())
	default:
		if err := hl.Extend(ctx); err != nil {
			t.Errorf("holder's Extend after the election, connected again: %v", err)
		}
	}
	_ = hl.Unlock(ctx)
	wg.Wait()
	for range waiters {
		if err := <-errs; err != nil {
			t.Errorf("waiter after the leader stopped: %v", err)
		}
	}
}

func testFollowerPaused(t *testing.T, e *testserver.ZooKeeperEnsemble) {
	ctx := ctxFor(t)
	base, key := testBase(), "follower-paused"
	leader := mustLeader(t, ctx, e)
	follower := (leader + 1) % 3
	other := 3 - leader - follower
	hc, _ := ensembleClient(t, e, base)
	l, err := mutex(t, hc, key).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var h holders
	h.enter(t, l)
	// A client of the two live members keeps working, and never gets the
	// lock while the holder has it.
	wc, _ := ensembleClient(t, e, base, leader, other)
	wm, om := mutex(t, wc, key), mutex(t, wc, key+"-other")
	if err := e.Members[follower].Pause(ctx); err != nil {
		t.Fatal(err)
	}
	paused := true
	defer func() {
		if paused {
			_ = e.Members[follower].Resume(context.Background())
		}
	}()
	// The client may see its connection drop when members lose touch on a
	// loaded machine: Lock rides that out, TryLock and Unlock report it.
	end := time.Now().Add(3 * testSession / 2)
	cycles := 0
	for time.Now().Before(end) {
		ol, err := om.Lock(ctx)
		if err != nil {
			t.Fatalf("Lock of another key while a follower is paused: %v", err)
		}
		if err := ol.Unlock(ctx); err != nil {
			t.Logf("Unlock of another key while a follower is paused: %v", err)
		} else {
			cycles++
		}
		if wl, err := wm.TryLock(ctx); err == nil {
			h.enter(t, wl)
			_ = wl.Unlock(ctx)
		} else if !errors.Is(err, dlock.ErrLocked) {
			t.Logf("TryLock of the held key while a follower is paused: %v", err)
		}
	}
	if cycles == 0 {
		t.Errorf("no lock and unlock of another key succeeded while a follower was paused")
	}
	if err := e.Members[follower].Resume(ctx); err != nil {
		t.Fatal(err)
	}
	paused = false
	if err := l.Err(); err != nil {
		t.Logf("the holder lost its lock while a follower was paused: %v", err)
	}
	_ = l.Unlock(ctx)
	waitUntil(t, 60*time.Second, "the follower serving again", func() bool {
		return testserver.PingZooKeeper(ctx, e.Members[follower].Addr()) == nil
	})
}

// testHolderServerPaused pauses the only server a holder is connected to, a
// follower, for pause: shorter than the session timeout, the lock is kept;
// longer, it is lost, and another client gets it only after the holder was
// told.
func testHolderServerPaused(t *testing.T, e *testserver.ZooKeeperEnsemble, pause time.Duration, lost bool) {
	ctx := ctxFor(t)
	base, key := testBase(), "holder-paused"
	leader := mustLeader(t, ctx, e)
	follower := (leader + 1) % 3
	hc, _ := ensembleClient(t, e, base, follower)
	oc, _ := ensembleClient(t, e, base, leader)
	l, err := mutex(t, hc, key).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var h holders
	h.enter(t, l)
	if err := e.Members[follower].Pause(ctx); err != nil {
		t.Fatal(err)
	}
	pausedAt := time.Now()
	unpause := sync.OnceFunc(func() {
		if err := e.Members[follower].Resume(context.Background()); err != nil {
			t.Errorf("unpause: %v", err)
		}
	})
	defer unpause()
	if !lost {
		time.Sleep(pause) // the length of the fault
		unpause()
		if err := l.Extend(ctx); err != nil {
			t.Fatalf("Extend after the holder's server froze for %v: %v", pause, err)
		}
		if _, err := mutex(t, oc, key).TryLock(ctx); !errors.Is(err, dlock.ErrLocked) {
			t.Fatalf("another client's TryLock after a %v freeze: %v, want ErrLocked", pause, err)
		}
		_ = l.Unlock(ctx)
		return
	}
	ol, err := mutex(t, oc, key).Lock(ctx)
	if err != nil {
		t.Fatalf("another client's Lock while the holder's server is frozen: %v", err)
	}
	h.enter(t, ol)
	t.Logf("another client got the lock %v after the holder's server froze", time.Since(pausedAt).Round(time.Millisecond))
	if err := l.Err(); !errors.Is(err, dlock.ErrLockLost) {
		t.Errorf("the cut-off holder's Err: %v, want ErrLockLost", err)
	}
	time.Sleep(time.Until(pausedAt.Add(pause))) // the length of the fault
	unpause()
	_ = ol.Unlock(ctx)
	// The holder's client gets a new session and works again.
	l2, err := mutex(t, hc, key).Lock(ctx)
	if err != nil {
		t.Fatalf("Lock by the holder's client after its server came back: %v", err)
	}
	_ = l2.Unlock(ctx)
}

// mustLeader returns the index of e's leader, or fails tb when no member
// says it leads.
func mustLeader(tb testing.TB, ctx context.Context, e *testserver.ZooKeeperEnsemble) int {
	tb.Helper()
	leader := e.Leader(ctx)
	if leader < 0 {
		tb.Fatal("no leader")
	}
	return leader
}
