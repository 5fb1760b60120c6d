package testserver

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/hazelcast/hazelcast-go-client/cluster"
	"github.com/hazelcast/hazelcast-go-client/types"
	"github.com/moby/moby/api/types/container"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"
)

// HazelcastClusterOf is a Hazelcast cluster of containers on a user-defined
// Docker network of its own, whose members find each other by TCP/IP join
// (hz1, hz2, ...). Each member's port is published on 127.0.0.1, and each
// member is a [Server] with the usual fault hooks; [HazelcastClusterOf.Isolate]
// cuts one member off from the others (iptables in its container) while
// clients on the host still reach it.
type HazelcastClusterOf struct {
	// Members are the cluster's members; Members[i] is hz<i+1>.
	Members []*Server
	network *testcontainers.DockerNetwork
}

// hazelcastClusterLabel marks the networks of Hazelcast clusters.
const hazelcastClusterLabel = "hazelcast-cluster"

// HazelcastClusterProps are the member properties of the cluster tests: a
// member that sends no heartbeat for 5 s is taken for dead (60 s by
// default), and split clusters look for each other to merge every 5 s
// (after 300 s, then every 120 s, by default), so that splits and merges
// happen within a test's time.
var HazelcastClusterProps = []string{
	"-Dhazelcast.heartbeat.interval.seconds=1",
	"-Dhazelcast.max.no.heartbeat.seconds=5",
	"-Dhazelcast.merge.first.run.delay.seconds=5",
	"-Dhazelcast.merge.next.run.delay.seconds=5",
	"-Dhazelcast.wait.seconds.before.join=1",
}

// StartHazelcastCluster starts n members that join each other and waits
// until each of them sees all n.
func StartHazelcastCluster(ctx context.Context, n int) (*HazelcastClusterOf, error) {
	members, nw, err := startNamed(ctx, HazelcastImage(), hazelcastClusterLabel, "hz", n, startHazelcastMember,
		func(ctx context.Context, members []*Server, i int) error {
			return (&HazelcastClusterOf{Members: members}).WaitMembers(ctx, i, n)
		})
	if err != nil {
		return nil, err
	}
	return &HazelcastClusterOf{Members: members, network: nw}, nil
}

// startHazelcastMember starts member i of the cluster named names, with
// NET_ADMIN so that Isolate can run iptables in it, and waits until it
// answers a client.
func startHazelcastMember(ctx context.Context, nw *testcontainers.DockerNetwork, names []string, i int) (*Server, error) {
	spec := HazelcastSpec()
	spec.Name = "hazelcast-" + names[i]
	spec.Env = map[string]string{
		"HZ_CLUSTER": HazelcastCluster,
		"HZ_MEMBERS": strings.Join(names, ","),
		"HZ_PROPS":   strings.Join(HazelcastClusterProps, " "),
	}
	s, err := startAt(ctx, func(int) Spec { return spec },
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.CapAdd = append(hc.CapAdd, "NET_ADMIN")
		}),
		network.WithNetwork([]string{names[i]}, nw))
	if err != nil {
		return nil, err
	}
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Addrs returns the members' addresses on the host, in order.
func (c *HazelcastClusterOf) Addrs() []string { return addrsOf(c.Members) }

// WaitMembers waits until member i sees a cluster of n members (itself
// included), as a new client of it learns from it, or ctx ends.
func (c *HazelcastClusterOf) WaitMembers(ctx context.Context, i, n int) error {
	var last int
	var err error
	delay := 100 * time.Millisecond
	for {
		attempt, cancel := context.WithTimeout(ctx, 10*time.Second)
		last, err = HazelcastMemberCount(attempt, c.Members[i].Addr())
		cancel()
		if err == nil && last == n {
			return nil
		}
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("testserver: hz%d does not see %d members (last: %d, %v): %w", i+1, n, last, err, ctx.Err())
		case <-timer.C:
		}
		delay = min(2*delay, time.Second)
	}
}

// HazelcastMemberCount returns how many members the member at addr counts
// in its cluster: a unisocket client of it learns the member list from it
// alone.
func HazelcastMemberCount(ctx context.Context, addr string) (int, error) {
	var mu sync.Mutex
	members := map[types.UUID]bool{}
	cfg := hazelcastProbeConfig(ctx, addr)
	cfg.AddMembershipListener(func(e cluster.MembershipStateChanged) {
		mu.Lock()
		defer mu.Unlock()
		members[e.Member.UUID] = e.State == cluster.MembershipStateAdded
	})
	client, err := connectHazelcastWith(ctx, cfg)
	if err != nil {
		return 0, err
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	defer client.Shutdown(shutdown)
	mu.Lock()
	defer mu.Unlock()
	n := 0
	for _, in := range members {
		if in {
			n++
		}
	}
	return n, nil
}

// Isolate cuts member i off from every other member, both ways, by dropping
// their packets in its container (connections between them hang, as in a
// network partition); clients on the host still reach every member.
func (c *HazelcastClusterOf) Isolate(ctx context.Context, i int) error {
	var rules []string
	for j, s := range c.Members {
		if j == i {
			continue
		}
		ip, err := s.ctr.ContainerIP(ctx)
		if err != nil {
			return fmt.Errorf("testserver: address of hz%d: %w", j+1, err)
		}
		rules = append(rules, "iptables -A INPUT -s "+ip+" -j DROP", "iptables -A OUTPUT -d "+ip+" -j DROP")
	}
	return c.exec(ctx, i, strings.Join(rules, " && "))
}

// Heal undoes Isolate on member i.
func (c *HazelcastClusterOf) Heal(ctx context.Context, i int) error {
	return c.exec(ctx, i, "iptables -F INPUT && iptables -F OUTPUT")
}

func (c *HazelcastClusterOf) exec(ctx context.Context, i int, script string) error {
	code, out, err := c.Members[i].ctr.Exec(ctx, []string{"sh", "-c", script})
	if err != nil {
		return fmt.Errorf("testserver: exec in hz%d: %w", i+1, err)
	}
	if code != 0 {
		b, _ := io.ReadAll(out)
		return fmt.Errorf("testserver: %q in hz%d exited %d: %s", script, i+1, code, strings.TrimSpace(string(b)))
	}
	return nil
}

// Terminate removes every member and the network.
func (c *HazelcastClusterOf) Terminate(ctx context.Context) error {
	return terminateAll(ctx, c.Members, c.network)
}
