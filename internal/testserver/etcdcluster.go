package testserver

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tcnetwork "github.com/testcontainers/testcontainers-go/network"
)

// EtcdClusterTiming is the Raft timing of the members of [StartEtcdCluster]:
// etcd's defaults (100 ms heartbeat, 1 s election timeout), which keep a
// cluster on a loaded 2-core machine from electing spuriously. The minimum
// lease TTL is then 2 s.
var EtcdClusterTiming = []string{"--heartbeat-interval=100", "--election-timeout=1000"}

// EtcdCluster is a cluster of etcd members, one container each, on a
// user-defined Docker network of their own, where they reach each other by
// name. Each member's client port is published on 127.0.0.1, and each
// member is a [Server], with its own fault hooks: Pause freezes it (its
// peers see it silent, its clients' requests hang), Stop and Start restart
// it with its data.
type EtcdCluster struct {
	// Members are the members, in the order of --initial-cluster.
	Members []*Server

	network *testcontainers.DockerNetwork
}

// StartEtcdCluster starts a cluster of size members with a static
// --initial-cluster, and returns once every member serves linearizable
// reads. The caller terminates it with [EtcdCluster.Terminate].
func StartEtcdCluster(ctx context.Context, size int) (*EtcdCluster, error) {
	if size < 1 {
		return nil, fmt.Errorf("testserver: etcd cluster of %d members", size)
	}
	// Every orphan network goes (""): Docker's address pools are shared.
	nw, err := clusterNetwork(ctx, EtcdImage, "etcd-cluster", "")
	if err != nil {
		return nil, err
	}
	c := &EtcdCluster{network: nw}

	token := "dlock-" + strings.ToLower(rand.Text()[:10])
	names := make([]string, size)
	peers := make([]string, size)
	for i := range size {
		names[i] = fmt.Sprintf("%s-etcd%d", token, i) // unique on the Docker engine
		peers[i] = fmt.Sprintf("%s=http://%s:%s", names[i], names[i], etcdPeerPort)
	}
	initial := strings.Join(peers, ",")
	// Members are started one after the other without waiting: none can
	// serve before a quorum has started.
	for i := range size {
		srv, err := startAt(ctx, func(hostPort int) Spec {
			return Spec{
				Name:  fmt.Sprintf("etcd%d", i),
				Image: EtcdImage,
				Port:  etcdClientPort,
				Cmd: etcdFlags(names[i], hostPort, "http://"+names[i]+":"+etcdPeerPort,
					initial, token, EtcdClusterTiming),
				Ready: PingEtcd,
			}
		}, tcnetwork.WithNetwork([]string{names[i]}, nw))
		if err == nil {
			c.Members = append(c.Members, srv)
		}
		if err != nil {
			_ = c.Terminate(context.WithoutCancel(ctx))
			return nil, err
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, size)
	for i, m := range c.Members {
		wg.Go(func() {
			if err := m.waitReady(ctx); err != nil {
				errs[i] = fmt.Errorf("%w%s", err, m.logTail(ctx))
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		_ = c.Terminate(context.WithoutCancel(ctx))
		return nil, err
	}
	return c, nil
}

// Addrs returns the members' published client addresses, "127.0.0.1:PORT".
func (c *EtcdCluster) Addrs() []string { return addrsOf(c.Members) }

// Leader returns the index in Members of the member that the first member
// to answer reports as the leader. Stopped or paused members are skipped.
func (c *EtcdCluster) Leader(ctx context.Context) (int, error) {
	ids := make([]uint64, len(c.Members))
	var leader uint64
	var errs []error
	for i, m := range c.Members {
		id, l, err := EtcdStatus(ctx, m.Addr())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ids[i] = id
		if leader == 0 {
			leader = l
		}
	}
	for i, id := range ids {
		if id != 0 && id == leader {
			return i, nil
		}
	}
	return -1, errors.Join(append(errs, errNoEtcdLeader)...)
}

// Kill stops member i at once with SIGKILL, as a crashed machine would: no
// graceful leader transfer, no goodbye to its peers or clients. Its data
// stays, and Members[i].Start brings it back.
func (c *EtcdCluster) Kill(ctx context.Context, i int) error {
	m := c.Members[i]
	if _, err := m.faults.Docker().ContainerKill(ctx, m.ctr.GetContainerID(), client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		return fmt.Errorf("testserver: kill %s: %w", m.spec.Name, err)
	}
	return nil
}

// Terminate removes every member and the network. A nil cluster is a no-op.
func (c *EtcdCluster) Terminate(ctx context.Context) error {
	if c == nil {
		return nil
	}
	return terminateAll(ctx, c.Members, c.network)
}
