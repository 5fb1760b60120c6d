package redis

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// configFor sets the server's parameter name to value for the rest of the
// test, and back to what it was when the test ends.
func configFor(t *testing.T, rdb *goredis.Client, name, value string) {
	t.Helper()
	ctx := ctxFor(t)
	old, err := rdb.ConfigGet(ctx, name).Result()
	if err != nil {
		t.Fatalf("CONFIG GET %s: %v", name, err)
	}
	if err := rdb.ConfigSet(ctx, name, value).Err(); err != nil {
		t.Fatalf("CONFIG SET %s %q: %v", name, value, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rdb.ConfigSet(ctx, name, old[name]).Err(); err != nil {
			t.Errorf("restore %s: %v", name, err)
		}
	})
}

// persistent gives the test server RDB snapshots for the test: the test
// image runs without persistence, which the doctor reports.
func persistent(t *testing.T, rdb *goredis.Client) { configFor(t, rdb, "save", "3600 1") }

func TestDoctorClean(t *testing.T) {
	rdb := newRDB(t)
	persistent(t, rdb)
	r := testkit.Diagnose(t, server.URL, 0)
	testkit.ExpectFindings(t, r)
	for _, c := range []string{checkEviction, checkPersistence, checkReplicas, checkRole, checkClock} {
		if !strings.Contains(strings.Join(r.Checks, ","), c) {
			t.Errorf("check %s did not run: %v", c, r.Checks)
		}
	}
}

// Lock keys have TTLs, so a volatile-* policy evicts them: only
// noeviction is safe.
func TestDoctorFindsEvictionPolicy(t *testing.T) {
	rdb := newRDB(t)
	persistent(t, rdb)
	configFor(t, rdb, "maxmemory-policy", "volatile-lru")
	testkit.ExpectFindings(t, testkit.Diagnose(t, server.URL, 0), checkEviction)
}

func TestDoctorFindsPersistenceOff(t *testing.T) {
	rdb := newRDB(t)
	configFor(t, rdb, "save", "")
	configFor(t, rdb, "appendonly", "no")
	testkit.ExpectFindings(t, testkit.Diagnose(t, server.URL, 0), checkPersistence)
}

// A container's clock is the host's: the skew is planted on the client's
// side, which is the same difference.
func TestDoctorFindsClockSkew(t *testing.T) {
	rdb := newRDB(t)
	persistent(t, rdb)
	clockNow = func() time.Time { return time.Now().Add(-5 * time.Second) }
	t.Cleanup(func() { clockNow = time.Now })
	testkit.ExpectFindings(t, testkit.Diagnose(t, server.URL, 0), checkClock)
}

// The URL names a replica (here of a master that is not there).
func TestDoctorFindsReplicaURL(t *testing.T) {
	rdb := newRDB(t)
	persistent(t, rdb)
	ctx := ctxFor(t)
	if err := rdb.ReplicaOf(ctx, "127.0.0.1", "1").Err(); err != nil {
		t.Fatalf("REPLICAOF: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rdb.ReplicaOf(ctx, "NO", "ONE").Err(); err != nil {
			t.Errorf("REPLICAOF NO ONE: %v", err)
		}
	})
	testkit.ExpectFindings(t, testkit.Diagnose(t, server.URL, 0), checkRole)
}

// A master with a real replica (a second server in the same container)
// and no min-replicas-to-write is a failover window; with it, clean.
func TestDoctorFindsUnacknowledgedReplicas(t *testing.T) {
	server.NeedFaults(t)
	spec := testserver.RedisSpec()
	spec.Name = "redis-doctor-replicated"
	spec.Cmd = []string{"sh", "-c", "redis-server --port 6380 --daemonize yes --save '' --appendonly no --replicaof 127.0.0.1 6379 && " +
		"exec redis-server --bind 0.0.0.0 --port 6379 --protected-mode no --daemonize no --save '' --appendonly yes"}
	srv := startOwn(t, spec)
	url := "redis://" + srv.Addr() + "/0"
	rdb := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	waitFor(t, 30*time.Second, "the replica to connect", func(ctx context.Context) bool {
		info, err := rdb.Info(ctx, "replication").Result()
		n, _ := strconv.Atoi(infoFields(info)["connected_slaves"])
		return err == nil && n > 0
	})
	testkit.ExpectFindings(t, testkit.Diagnose(t, url, 0), checkReplicas)

	if err := rdb.ConfigSet(ctxFor(t), "min-replicas-to-write", "1").Err(); err != nil {
		t.Fatal(err)
	}
	testkit.ExpectFindings(t, testkit.Diagnose(t, url, 0))
}

// A one-node Cluster with half its slots assigned, then all of them.
func TestDoctorFindsUncoveredSlots(t *testing.T) {
	server.NeedFaults(t)
	spec := testserver.RedisSpec()
	spec.Name = "redis-doctor-cluster"
	spec.Cmd = []string{"redis-server", "--bind", "0.0.0.0", "--port", "6379", "--protected-mode", "no",
		"--daemonize", "no", "--save", "", "--appendonly", "yes",
		"--cluster-enabled", "yes", "--cluster-config-file", "/tmp/nodes.conf"}
	srv := startOwn(t, spec)
	ctx := ctxFor(t)
	rdb := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	// The node must announce the address the tests reach it at, the
	// published port, not its address on Docker's network.
	_, port, _ := strings.Cut(srv.Addr(), ":")
	for _, kv := range [][2]string{{"cluster-announce-ip", "127.0.0.1"}, {"cluster-announce-port", port}} {
		if err := rdb.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			t.Fatalf("CONFIG SET %s: %v", kv[0], err)
		}
	}
	if err := rdb.ClusterAddSlotsRange(ctx, 0, 8191).Err(); err != nil {
		t.Fatalf("CLUSTER ADDSLOTSRANGE: %v", err)
	}
	url := "redis+cluster://" + srv.Addr()
	testkit.ExpectFindings(t, testkit.Diagnose(t, url, 0), checkSlots)

	if err := rdb.ClusterAddSlotsRange(ctx, 8192, 16383).Err(); err != nil {
		t.Fatalf("CLUSTER ADDSLOTSRANGE: %v", err)
	}
	waitFor(t, 30*time.Second, "cluster_state:ok", func(ctx context.Context) bool {
		info, err := rdb.ClusterInfo(ctx).Result()
		return err == nil && infoFields(info)["cluster_state"] == "ok"
	})
	testkit.ExpectFindings(t, testkit.Diagnose(t, url, 0))
}

// waitFor polls cond until it holds, failing t after limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func(context.Context) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond(ctx) {
		select {
		case <-ctx.Done():
			t.Fatalf("waited %v for %s", limit, what)
		case <-tick.C:
		}
	}
}

// startOwn starts spec in a container of its own, terminated when t ends:
// a server configured unlike the package's shared one.
func startOwn(t *testing.T, spec testserver.Spec) *testserver.Server {
	return testserver.Own(t, testserver.StartTimeout, func(ctx context.Context) (*testserver.Server, error) {
		return testserver.Start(ctx, spec)
	})
}
