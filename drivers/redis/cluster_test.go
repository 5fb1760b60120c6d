package redis

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/dlock-go/dlock/conformance"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// TestCluster runs everything Cluster against a 3-master Redis Cluster,
// started for this test only.
func TestCluster(t *testing.T) {
	c := &clusterEnv{cluster: ownCluster(t, 3)}
	t.Run("Conformance", c.testConformance)
	t.Run("ShardedNotifications", c.testShardedNotifications)
	t.Run("GrantByRelease", c.testGrantByRelease)
	t.Run("KeysOnEveryShard", c.testKeysOnEveryShard)
	t.Run("SubscriptionFollowsSlot", c.testSubscriptionFollowsSlot)
	t.Run("NoDoubleGrantUnderRandomDeadlines", func(t *testing.T) {
		checkNoDoubleGrant(t, func(t *testing.T) driver.Driver { return c.open(t) })
	})
	t.Run("NoGoroutineLeak", c.testNoGoroutineLeak)
	t.Run("AcquireAnyAcrossSlots", c.testAcquireAnyAcrossSlots)
	t.Run("Election", func(t *testing.T) {
		checkElection(t, func(t *testing.T) driver.Driver { return c.open(t) })
	})
}

// A Cluster Driver's goroutines (one reader per sharded connection) end with
// Close.
func (c *clusterEnv) testNoGoroutineLeak(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for range 2 {
		d, err := openCluster(ctxFor(t), testkit.URL(t, c.cluster.URL()))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			s, err := d.(*Driver).Subscribe(ctxFor(t), "leak/"+strconv.Itoa(i))
			if err != nil {
				t.Fatal(err)
			}
			if i%2 == 0 {
				_ = s.Close()
			}
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

type clusterEnv struct{ cluster *testserver.RedisCluster }

func (c *clusterEnv) open(t *testing.T) *Driver {
	t.Helper()
	u := testkit.URL(t, c.cluster.URL())
	return testkit.Closing(t, "openCluster", func() (driver.Driver, error) { return openCluster(ctxFor(t), u) }).(*Driver)
}

func (c *clusterEnv) client(t *testing.T) *goredis.ClusterClient {
	t.Helper()
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: c.cluster.Addrs(), ContextTimeoutEnabled: true, MaintNotificationsConfig: maintOff()})
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

func (c *clusterEnv) testConformance(t *testing.T) {
	url := testkit.URL(t, c.cluster.URL())
	cc := c.client(t)
	conformance.Run(t, conformance.Harness{
		NewDriver: func(ctx context.Context) (driver.Driver, error) { return openCluster(ctx, url) },
		TTL:       suiteTTL,
		Tamper:    tamper(cc),
		// The partition cases cut one client off from every server.
		NewLinkedDriver: linkedOpener(t, url, openClusterLinked),
		// The whole backend is every master.
		Faults: c.cluster.FaultHooks(),
		// Waiting clients queue beside the lock, on its master.
		ClientsServedInOrder: true,
	})
}

// A release publishes with SPUBLISH on the lock's shard: the driver's
// sharded subscription wakes, and a classic subscriber of the same channel
// name on any node hears nothing (a PUBLISH would reach every node of the
// cluster).
func (c *clusterEnv) testShardedNotifications(t *testing.T) {
	d, waiter := c.open(t), c.open(t)
	key := testkit.Key(t)
	n := namesOf(DefaultKeyPrefix, key)
	sub := subscribed(t, waiter, key)

	var classic []*goredis.PubSub
	for _, a := range c.cluster.Addrs() {
		rc := goredis.NewClient(&goredis.Options{Addr: a, MaintNotificationsConfig: maintOff()})
		t.Cleanup(func() { _ = rc.Close() })
		ps := rc.Subscribe(ctxFor(t), n.channel())
		if _, err := ps.Receive(ctxFor(t)); err != nil { // the confirmation
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ps.Close() })
		classic = append(classic, ps)
	}

	info, err := d.Inspect(ctxFor(t), key)
	if err != nil || info.Waiters != 1 {
		t.Errorf("Inspect with one sharded subscriber: %+v, %v; want 1 waiter", info, err)
	}
	l := mustAcquire(t, d, testkit.Request(key, 5*time.Second))
	mustRelease(t, l)
	if !waken(sub, 5*time.Second) {
		t.Fatal("the release did not wake the sharded subscriber")
	}
	for i, ps := range classic {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		msg, err := ps.Receive(ctx)
		cancel()
		if err == nil {
			t.Errorf("node %d: a classic subscriber received %v: the release broadcast to the cluster", i, msg)
		}
	}
}

// On a Cluster too, a release grants the lock to the queue's head (the
// queue and the counter share the lock's slot) and tells it by SPUBLISH on
// its personal channel: the head's next Acquire is that grant, the hold of
// its queued request, with no request of its own.
func (c *clusterEnv) testGrantByRelease(t *testing.T) {
	holder, head := c.open(t), c.open(t)
	key := testkit.Key(t)
	held := mustAcquire(t, holder, testkit.Request(key, grantTTL))
	sub, queued := waitingFor(t, head, key)
	mustRelease(t, held)
	if !waken(sub, 10*time.Second) {
		t.Fatal("the queue's head was not woken by the release")
	}
	l, err := head.Acquire(ctxFor(t), nextWaiting(key))
	if err != nil {
		t.Fatalf("the head's Acquire after the release: %v", err)
	}
	if id := l.(*lease).id; id != queued.ID {
		t.Errorf("the head's lease holds request %s, want the queued request %s (the release's grant)", id, queued.ID)
	}
	if l.Token() <= held.Token() {
		t.Errorf("token %d after %d, want greater", l.Token(), held.Token())
	}
	mustRelease(t, l)
}

// Locks whose slots are on every master work side by side: each lock's
// names share a slot, so every script runs on one node.
func (c *clusterEnv) testKeysOnEveryShard(t *testing.T) {
	d, other := c.open(t), c.open(t)
	cc := c.client(t)
	masters := map[string]bool{}
	var leases []driver.Lease
	for i := 0; len(masters) < 3 && i < 100; i++ {
		key := testkit.Key(t)
		m, err := cc.MasterForKey(ctxFor(t), namesOf(DefaultKeyPrefix, key).lock)
		if err != nil {
			t.Fatal(err)
		}
		addr := m.Options().Addr
		if masters[addr] {
			continue
		}
		masters[addr] = true
		for _, mode := range []driver.Mode{driver.Shared, driver.Shared} {
			leases = append(leases, mustAcquire(t, d, reqOf(key, 5*time.Second, mode, "")))
		}
		expectRefused(t, other, reqOf(key, time.Second, driver.Exclusive, ""), "readers hold it")
	}
	if len(masters) != 3 {
		t.Fatalf("keys reached %d masters, want 3", len(masters))
	}
	ttls := make([]time.Duration, len(leases))
	for i := range ttls {
		ttls[i] = 10 * time.Second
	}
	for i, err := range d.ExtendBatch(ctxFor(t), leases, ttls) {
		if err != nil {
			t.Errorf("ExtendBatch across shards: lease %d: %v", i, err)
		}
	}
	for _, l := range leases {
		mustRelease(t, l)
	}
}

// When the slot of a lock moves to another master, the server ends the
// sharded subscriptions of its channels; the notifier subscribes again on
// the new owner, so releases there still wake the waiter.
func (c *clusterEnv) testSubscriptionFollowsSlot(t *testing.T) {
	d, waiter := c.open(t), c.open(t)
	cc := c.client(t)
	ctx := ctxFor(t)
	key := testkit.Key(t)
	n := namesOf(DefaultKeyPrefix, key)
	sub := subscribed(t, waiter, key)

	slot, err := cc.ClusterKeySlot(ctx, n.lock).Result()
	if err != nil {
		t.Fatal(err)
	}
	src, err := cc.MasterForKey(ctx, n.lock)
	if err != nil {
		t.Fatal(err)
	}
	var dst *goredis.Client
	var nodes []*goredis.Client
	for _, a := range c.cluster.Addrs() {
		rc := goredis.NewClient(&goredis.Options{Addr: a, MaintNotificationsConfig: maintOff()})
		t.Cleanup(func() { _ = rc.Close() })
		nodes = append(nodes, rc)
		if a != src.Options().Addr && dst == nil {
			dst = rc
		}
	}
	srcID, err := src.ClusterMyID(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	dstID, err := dst.ClusterMyID(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID).Err())
	must(src.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID).Err())
	host, port, _ := strings.Cut(dst.Options().Addr, ":")
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, int(slot), 100).Result()
		must(err)
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		must(src.Do(ctx, args...).Err())
	}
	for _, rc := range nodes {
		must(rc.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err())
	}
	// The old owner's SUNSUBSCRIBE wakes the waiter, and so does the new
	// owner's confirmation.
	if !waken(sub, 5*time.Second) {
		t.Fatal("no wake-up when the slot moved")
	}
	waitServer(t, "the channel to be subscribed on its new shard", func() bool {
		counts, err := dst.PubSubShardNumSub(ctx, n.channel()).Result()
		return err == nil && counts[n.channel()] == 1
	})
	for len(sub.C()) > 0 {
		<-sub.C()
	}
	mustRelease(t, mustAcquire(t, d, testkit.Request(key, 5*time.Second)))
	if !waken(sub, 5*time.Second) {
		t.Fatal("a release on the slot's new master did not wake the waiter")
	}
}
