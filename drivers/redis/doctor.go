package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/doctor"
)

// The checks `dlock doctor` runs on a Redis deployment, by name.
const (
	checkEviction    = "redis.maxmemory-policy"
	checkPersistence = "redis.persistence"
	checkReplicas    = "redis.replication"
	checkRole        = "redis.role"
	checkSlots       = "redis.cluster-slots"
	checkClock       = "redis.clock"
)

// maxClockSkew is how far the server's clock may be from this host's
// before the doctor reports it, beyond the uncertainty of the round trip.
const maxClockSkew = time.Second

// clockNow is the local clock the clock check compares the server's with;
// the tests move it to plant a skew, as a container's clock cannot be.
var clockNow = time.Now

func init() {
	for _, s := range []string{Scheme, SchemeTLS, SchemeCluster, SchemeClusterTLS, SchemeSentinel, SchemeSentinelTLS} {
		doctor.Register(s, diagnose)
	}
}

// diagnose is the doctor of the Redis schemes: it connects as dlock.Open
// does, then examines the server (the master the sentinels name, for a
// Sentinel URL), or every master of a Cluster.
func diagnose(ctx context.Context, req doctor.Request, r *doctor.Report) error {
	openURL := open
	switch strings.ToLower(req.URL.Scheme) {
	case SchemeCluster, SchemeClusterTLS:
		openURL = openCluster
	case SchemeSentinel, SchemeSentinelTLS:
		openURL = openSentinel
	}
	connectCtx, cancel := req.Connecting(ctx)
	defer cancel()
	d, err := openURL(connectCtx, req.URL)
	if err != nil {
		return err
	}
	defer d.Close()
	client, acks := d.(*Driver).client, d.(*Driver).acks.n
	cc, ok := client.(*goredis.ClusterClient)
	if !ok {
		return diagnoseNode(ctx, client, "", acks, r)
	}
	if err := diagnoseSlots(ctx, cc, r); err != nil {
		return err
	}
	return cc.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error {
		return diagnoseNode(ctx, c, c.Options().Addr, 0, r)
	})
}

// diagnoseNode examines one server (node names it in a Cluster, or is
// empty): its configuration, replication and clock. acks is the number of
// replica acknowledgements the URL makes grants wait for (replica_acks).
func diagnoseNode(ctx context.Context, c goredis.Cmdable, node string, acks int, r *doctor.Report) error {
	on := ""
	if node != "" {
		on = " on " + node
	}
	info, err := c.Info(ctx, "server", "replication").Result()
	if err != nil {
		return fmt.Errorf("redis: INFO%s: %w", on, err)
	}
	fields := infoFields(info)
	if node == "" {
		r.Fact("version", "Redis %s", fields["redis_version"])
	}
	cfg, err := c.ConfigGet(ctx, "*").Result()
	if err != nil {
		// Managed services rename or forbid CONFIG: say so, check the rest.
		for _, check := range []string{checkEviction, checkPersistence, checkReplicas} {
			r.Skip(check, fmt.Errorf("CONFIG GET%s refused: %v", on, err))
		}
	} else {
		diagnoseEviction(cfg, on, r)
		diagnosePersistence(cfg, on, r)
		diagnoseReplicas(cfg, fields, on, acks, r)
	}
	r.Ran(checkRole)
	if fields["role"] == "slave" {
		r.Hazard(doctor.Finding{
			Check:  checkRole,
			Hazard: fmt.Sprintf("the server%s is a replica of %s:%s", on, fields["master_host"], fields["master_port"]),
			Why:    "a replica refuses writes (READONLY), so no lock can be taken, and when it is made writable its locks are not the master's",
			Fix:    "point the URL at the master (or use redis+sentinel:// to follow failovers)",
		})
	}
	return diagnoseClock(ctx, c, on, r)
}

// diagnoseEviction reports a maxmemory-policy that may evict lock keys.
// Every lock key has a TTL, so the volatile-* policies may evict them as
// readily as the allkeys-* ones: only noeviction keeps them.
func diagnoseEviction(cfg map[string]string, on string, r *doctor.Report) {
	r.Ran(checkEviction)
	policy := cfg["maxmemory-policy"]
	if policy == "" || policy == "noeviction" {
		return
	}
	limit := "maxmemory is " + cfg["maxmemory"]
	if cfg["maxmemory"] == "0" {
		limit = "maxmemory is 0 (no limit) for now: setting one, or a managed service's default, makes the policy act"
	}
	r.Hazard(doctor.Finding{
		Check:  checkEviction,
		Hazard: fmt.Sprintf("maxmemory-policy is %s%s (%s)", policy, on, limit),
		Why:    "under memory pressure Redis deletes keys it picks, lock keys included (they have TTLs, so volatile-* policies pick them too): a held lock vanishes and a second client gets it",
		Fix:    "CONFIG SET maxmemory-policy noeviction (and in redis.conf), or give locks a Redis of their own",
	})
}

// diagnosePersistence reports a server that saves nothing: a restart
// forgets every hold and counter.
func diagnosePersistence(cfg map[string]string, on string, r *doctor.Report) {
	r.Ran(checkPersistence)
	if cfg["appendonly"] == "yes" || strings.TrimSpace(cfg["save"]) != "" {
		return
	}
	r.Hazard(doctor.Finding{
		Check:  checkPersistence,
		Hazard: "persistence is off" + on + " (appendonly no, save \"\")",
		Why:    "a restart forgets every held lock, so another client gets it while its holder still works; fencing tokens then rise only from the server's clock, which must never step back",
		Fix:    "CONFIG SET appendonly yes with appendfsync everysec or always (and in redis.conf); or have holders treat a restart as a loss (fence writes with lease.Token())",
	})
}

// diagnoseReplicas reports a master with replicas and nothing that makes
// it stop accepting writes they have not seen, unless the URL makes grants
// wait for replicas' acknowledgements.
func diagnoseReplicas(cfg, info map[string]string, on string, acks int, r *doctor.Report) {
	r.Ran(checkReplicas)
	replicas, _ := strconv.Atoi(info["connected_slaves"])
	if info["role"] != "master" || replicas == 0 {
		return
	}
	if acks > 0 {
		// Grants and renewals wait for acks replicas (WAIT): a failover to
		// one of them keeps every grant the client was given.
		r.Fact("replica acknowledgements", "every grant and renewal waits for %d of %d replica(s)", acks, replicas)
		return
	}
	if n, _ := strconv.Atoi(cfg["min-replicas-to-write"]); n > 0 {
		return
	}
	r.Hazard(doctor.Finding{
		Check:  checkReplicas,
		Hazard: fmt.Sprintf("the master%s has %d replica(s) and min-replicas-to-write 0", on, replicas),
		Why:    "replication is asynchronous: a failover promotes a replica that may not have seen the latest grants, so a lock granted just before it is granted again",
		Fix:    "add replica_acks=N to the URL so that every grant and renewal waits until N replicas have it (WAIT); or CONFIG SET min-replicas-to-write 1 and min-replicas-max-lag 1 so that a master cut off from its replicas stops granting; fence writes with lease.Token()",
	})
}

// diagnoseSlots reports a Cluster whose hash slots are not all served.
func diagnoseSlots(ctx context.Context, cc *goredis.ClusterClient, r *doctor.Report) error {
	r.Ran(checkSlots)
	info, err := cc.ClusterInfo(ctx).Result()
	if err != nil {
		return fmt.Errorf("redis: CLUSTER INFO: %w", err)
	}
	f := infoFields(info)
	r.Fact("cluster", "state %s, %s of 16384 slots assigned, %s masters", f["cluster_state"], f["cluster_slots_assigned"], f["cluster_size"])
	ok, _ := strconv.Atoi(f["cluster_slots_ok"])
	if f["cluster_state"] == "ok" && ok == 16384 {
		return nil
	}
	r.Hazard(doctor.Finding{
		Check:  checkSlots,
		Hazard: fmt.Sprintf("the cluster's state is %s with %d of 16384 slots served", f["cluster_state"], ok),
		Why:    "the locks whose keys hash to an unserved slot cannot be taken, renewed or released, and by default the cluster refuses every command while slots are uncovered",
		Fix:    "assign every slot (redis-cli --cluster fix) and give each master a replica so a lost master's slots are taken over",
	})
	return nil
}

// diagnoseClock reports a server clock far from this host's: the driver
// floors fencing tokens at the server's clock, so that they keep rising
// when a restart forgets the counter.
func diagnoseClock(ctx context.Context, c goredis.Cmdable, on string, r *doctor.Report) error {
	r.Ran(checkClock)
	before := clockNow()
	server, err := c.Time(ctx).Result()
	if err != nil {
		return fmt.Errorf("redis: TIME%s: %w", on, err)
	}
	after := clockNow()
	rtt := after.Sub(before)
	skew := server.Sub(before.Add(rtt / 2))
	if skew.Abs() <= maxClockSkew+rtt/2 {
		return nil
	}
	r.Hazard(doctor.Finding{
		Check:  checkClock,
		Hazard: fmt.Sprintf("the server's clock%s is %v from this host's", on, skew.Round(time.Millisecond)),
		Why:    "a clock that wrong gets stepped back into line sooner or later, and the driver floors fencing tokens at the server's clock when a restart has forgotten the counter: tokens after such a step can be lower than tokens already issued",
		Fix:    "run NTP (chrony, systemd-timesyncd) on the server's host and this one",
	})
	return nil
}

// infoFields parses INFO's (or CLUSTER INFO's) "name:value" lines.
func infoFields(info string) map[string]string {
	m := map[string]string{}
	for line := range strings.Lines(info) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m
}
