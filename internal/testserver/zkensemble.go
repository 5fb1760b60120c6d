package testserver

import (
	"context"
	"strconv"
	"strings"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"
)

// ZooKeeperEnsemble is a ZooKeeper ensemble of containers on a user-defined
// Docker network of its own, where the members reach each other by their
// names (zk1, zk2, ...). Each member's client port is published on
// 127.0.0.1, and each member is a [Server] with the usual fault hooks.
type ZooKeeperEnsemble struct {
	// Members are the ensemble's servers; Members[i] has id i+1.
	Members []*Server
	network *testcontainers.DockerNetwork
}

// ensembleLabel marks the networks of ZooKeeper ensembles.
const ensembleLabel = "zookeeper-ensemble"

// StartZooKeeperEnsemble starts an ensemble of n members (3 makes a quorum of
// 2) and waits until every member serves, as leader or follower.
func StartZooKeeperEnsemble(ctx context.Context, n int) (*ZooKeeperEnsemble, error) {
	// A member serves only once a quorum has formed: it is ready when it
	// serves.
	members, nw, err := startNamed(ctx, ZooKeeperImage, ensembleLabel, "zk", n, startMember,
		func(ctx context.Context, members []*Server, i int) error { return members[i].waitReady(ctx) })
	if err != nil {
		return nil, err
	}
	return &ZooKeeperEnsemble{Members: members, network: nw}, nil
}

// startMember starts member i of the ensemble named names without waiting
// for it to serve.
func startMember(ctx context.Context, nw *testcontainers.DockerNetwork, names []string, i int) (*Server, error) {
	spec := ZooKeeperSpec()
	spec.Name = "zookeeper-" + names[i]
	spec.Env = map[string]string{
		"ZK_TICK_MS": strconv.Itoa(ZooKeeperTickMs),
		"ZK_ID":      strconv.Itoa(i + 1),
		"ZK_SERVERS": strings.Join(names, ","),
	}
	return startAt(ctx, func(int) Spec { return spec }, network.WithNetwork([]string{names[i]}, nw))
}

// Leader returns the index in Members of the member that reports itself
// leader, or -1 when none does (an election is under way). Members that do
// not answer are skipped.
func (e *ZooKeeperEnsemble) Leader(ctx context.Context) int {
	for i, s := range e.Members {
		if mode, err := ZooKeeperMode(ctx, s.Addr()); err == nil && mode == "leader" {
			return i
		}
	}
	return -1
}

// Terminate removes every member and the network.
func (e *ZooKeeperEnsemble) Terminate(ctx context.Context) error {
	return terminateAll(ctx, e.Members, e.network)
}
