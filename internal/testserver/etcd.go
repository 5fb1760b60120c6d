package testserver

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// EtcdImage is the image testenv/setup builds from testenv/images/etcd:
// Debian's etcd-server package (etcd 3.4).
const EtcdImage = "dlock-test/etcd:latest"

// EnvEtcdURL names the environment variable that points the tests at an
// existing etcd cluster (e.g. "etcd://127.0.0.1:2379") instead of a
// container. Such a cluster has no fault hooks, and the tests write under
// the driver's prefixes in it. Its minimum lease TTL must not exceed the
// session TTL the tests ask for (1 s; etcd's minimum is 1.5 election
// timeouts, rounded up to whole seconds: 2 s with the default 1 s timeout).
const EnvEtcdURL = "DLOCK_TEST_ETCD_URL"

// etcdClientPort and etcdPeerPort are etcd's ports inside the container.
const (
	etcdClientPort = "2379/tcp"
	etcdPeerPort   = "2380"
)

// EtcdTiming is the Raft timing of the single-member test server: a 50 ms
// heartbeat and a 500 ms election timeout. etcd's minimum lease TTL is 1.5
// election timeouts rounded up to whole seconds, so this lets the tests use
// 1 s session leases (the default timing would make it 2 s). A single
// member never holds an election after its first, so the short timeout
// costs nothing in stability.
var EtcdTiming = []string{"--heartbeat-interval=50", "--election-timeout=500"}

// etcdFlags returns the flags of one member. Configuration is by flags only:
// etcd 3.4 refuses a setting given both as a flag and as an ETCD_* variable.
// Clients are served on every interface of the container, and advertised at
// the published address the tests dial (127.0.0.1:hostPort), which is what a
// client that syncs its endpoints from the member list must be told.
func etcdFlags(name string, hostPort int, peerURL, initialCluster, token string, timing []string) []string {
	flags := []string{
		"--name=" + name,
		"--data-dir=/var/lib/etcd/dlock",
		"--listen-client-urls=http://0.0.0.0:2379",
		"--advertise-client-urls=http://127.0.0.1:" + strconv.Itoa(hostPort),
		"--listen-peer-urls=http://0.0.0.0:" + etcdPeerPort,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=" + initialCluster,
		"--initial-cluster-state=new",
		"--initial-cluster-token=" + token,
		"--logger=zap",
		"--log-level=warn",
	}
	return append(flags, timing...)
}

// EtcdSpec describes a single-member etcd container whose client port is
// published on hostPort: data in the container's own filesystem (so
// [Server.Stop] and [Server.Start] keep it, as a restarted member keeps its
// disk), [EtcdTiming], and readiness by a linearizable read ([PingEtcd]).
func EtcdSpec(hostPort int) Spec {
	peer := "http://127.0.0.1:" + etcdPeerPort
	return Spec{
		Name:  "etcd",
		Image: EtcdImage,
		Port:  etcdClientPort,
		Cmd:   etcdFlags("dlock", hostPort, peer, "dlock="+peer, "dlock-test", EtcdTiming),
		Ready: PingEtcd,
	}
}

// StartEtcd starts a single-member etcd container; see [Start]. Unlike
// Start, it picks the published port before the container starts, because
// the member advertises it.
func StartEtcd(ctx context.Context) (*Server, error) {
	if err := prepare(ctx, EtcdImage); err != nil {
		return nil, err
	}
	srv, err := startAt(ctx, EtcdSpec)
	if err != nil {
		return nil, err
	}
	if err := srv.ready(ctx); err != nil {
		return nil, err
	}
	return srv, nil
}

// EtcdTarget returns the etcd cluster the tests should use: the one named by
// DLOCK_TEST_ETCD_URL when it is set (Server nil), else a new single-member
// container with URL "etcd://127.0.0.1:PORT". Its signature fits [Main].
func EtcdTarget(ctx context.Context) (Target, error) {
	return target(ctx, EnvEtcdURL, StartEtcd, func(addr string) string { return "etcd://" + addr })
}

// PingEtcd reads one key linearizably from the etcd member at addr
// ("host:port"), through a client that talks to that member only. A TCP
// connect is not enough (Docker's port proxy accepts before etcd listens),
// and a linearizable read also needs a leader, so a member that answers has
// joined a cluster with a quorum. ctx bounds the whole exchange.
func PingEtcd(ctx context.Context, addr string) error {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{addr},
		Logger:    zap.NewNop(),
	})
	if err != nil {
		return err
	}
	defer cli.Close()
	if _, err := cli.Get(ctx, "dlock-testserver-ping", clientv3.WithCountOnly()); err != nil {
		return fmt.Errorf("etcd read at %s: %w", addr, err)
	}
	return nil
}

// EtcdStatus returns the member ID, and the ID of the leader it knows, of
// the etcd member at addr.
func EtcdStatus(ctx context.Context, addr string) (member, leader uint64, err error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, Logger: zap.NewNop()})
	if err != nil {
		return 0, 0, err
	}
	defer cli.Close()
	st, err := cli.Status(ctx, addr)
	if err != nil {
		return 0, 0, err
	}
	return st.Header.MemberId, st.Leader, nil
}

var errNoEtcdLeader = errors.New("testserver: no etcd member reports itself the leader")
