package testserver

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/testcontainers/testcontainers-go"
	tcexec "github.com/testcontainers/testcontainers-go/exec"

	"github.com/dlock-go/dlock/conformance"
	"github.com/dlock-go/dlock/conformance/containerfaults"
)

// RedisCluster is a Redis Cluster of masters without replicas, one container
// each. The nodes run on the host's network (docker run --network host),
// each bound to 127.0.0.1 on a client port and a cluster bus port of its
// own, so that the addresses they announce to each other, and in MOVED
// redirections and CLUSTER SLOTS to clients, are the addresses a client on
// this machine dials, and stay the same across Stop and Start. (On Docker's
// bridge network a node announces its container address, which the host
// cannot reach, or, with --cluster-announce-ip 127.0.0.1, an address its
// peers cannot reach.) Each node is a [Server] with its own fault hooks.
type RedisCluster struct {
	Nodes []*Server
}

// StartRedisCluster starts n masters (at least 3, as redis-cli requires),
// assigns the 16384 slots among them with redis-cli --cluster create, and
// returns once every node reports cluster_state:ok. On failure it removes
// what it started. The caller terminates the cluster with
// [RedisCluster.Terminate].
func StartRedisCluster(ctx context.Context, n int) (*RedisCluster, error) {
	if n < 3 {
		return nil, fmt.Errorf("testserver: a Redis Cluster needs 3 masters, not %d", n)
	}
	// Set once the slots are assigned: from then on a node is ready only
	// when it reports cluster_state:ok, so that Start returns once a
	// restarted node serves its slots again.
	formed := new(atomic.Bool)
	c := &RedisCluster{}
	var err error
	c.Nodes, err = startEach(n, func(i int) (*Server, error) { return startClusterNode(ctx, i, formed) })
	if err != nil {
		_ = c.Terminate(context.WithoutCancel(ctx))
		return nil, err
	}
	create := []string{"redis-cli", "--cluster", "create"}
	create = append(create, c.Addrs()...)
	create = append(create, "--cluster-yes")
	code, out, err := c.Nodes[0].ctr.Exec(ctx, create, tcexec.Multiplexed())
	if err == nil && code != 0 {
		b, _ := io.ReadAll(out)
		err = fmt.Errorf("exit status %d:\n%s", code, b)
	}
	if err != nil {
		_ = c.Terminate(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("testserver: redis-cli --cluster create: %w", err)
	}
	formed.Store(true)
	if err := c.Each(ctx, (*Server).waitReady); err != nil {
		_ = c.Terminate(context.WithoutCancel(ctx))
		return nil, err
	}
	return c, nil
}

// startClusterNode starts node i on free client and bus ports of the host
// (see startHostRedis).
func startClusterNode(ctx context.Context, i int, formed *atomic.Bool) (*Server, error) {
	if err := prepare(ctx, RedisImage); err != nil {
		return nil, err
	}
	ready := func(ctx context.Context, addr string) error {
		if !formed.Load() {
			return PingRedis(ctx, addr)
		}
		return clusterStateOK(ctx, addr)
	}
	return startHostRedis(ctx, fmt.Sprintf("redis-cluster%d", i), ready, func(port int) ([]string, error) {
		bus, err := containerfaults.FreePort()
		if err != nil || bus == port {
			return nil, fmt.Errorf("find a free bus port: %v", err)
		}
		return []string{"redis-server",
			"--bind", "127.0.0.1", "--port", strconv.Itoa(port),
			"--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(bus),
			"--cluster-config-file", fmt.Sprintf("/tmp/nodes-%d.conf", port),
			"--protected-mode", "no", "--daemonize", "no", "--save", "", "--appendonly", "no"}, nil
	})
}

// runHostNetwork runs spec's container on the host's network, labelled as
// Start labels its containers, so that orphans are removed the same way.
func runHostNetwork(ctx context.Context, spec Spec, port int) (*testcontainers.DockerContainer, error) {
	ctr, err := testcontainers.Run(ctx, spec.Image,
		testcontainers.WithName(fmt.Sprintf("dlock-test-%s-%d", spec.Name, port)),
		withOwnerLabels(spec.Name),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) { hc.NetworkMode = "host" }),
		testcontainers.WithCmd(spec.Cmd...),
	)
	if err != nil {
		if ctr != nil {
			_ = ctr.Terminate(context.WithoutCancel(ctx))
		}
		return nil, err
	}
	return ctr, nil
}

// clusterStateOK asks the node at addr for CLUSTER INFO over a raw
// connection and succeeds when it reports cluster_state:ok.
func clusterStateOK(ctx context.Context, addr string) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(5 * time.Second)
	}
	if err := conn.SetDeadline(deadline); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	if _, err := conn.Write([]byte("CLUSTER INFO\r\n")); err != nil {
		return err
	}
	r := bufio.NewReader(conn)
	head, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	size, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(head, "$")))
	if !strings.HasPrefix(head, "$") || err != nil || size < 0 {
		return fmt.Errorf("redis CLUSTER INFO %s: got %q", addr, strings.TrimSpace(head))
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(r, body); err != nil {
		return err
	}
	if !strings.Contains(string(body), "cluster_state:ok") {
		return fmt.Errorf("redis cluster node %s: not ok yet", addr)
	}
	return nil
}

// Addrs returns the nodes' addresses, "127.0.0.1:PORT", in order.
func (c *RedisCluster) Addrs() []string { return addrsOf(c.Nodes) }

// URL returns the dlock URL of the cluster, "redis+cluster://ADDR,ADDR,...".
func (c *RedisCluster) URL() string {
	return "redis+cluster://" + strings.Join(c.Addrs(), ",")
}

// Each runs f on every node at once and joins the errors.
func (c *RedisCluster) Each(ctx context.Context, f func(*Server, context.Context) error) error {
	return eachServer(ctx, c.Nodes, f)
}

// FaultHooks returns the hooks of the whole backend, every server at once,
// for a conformance Harness: Pause and Resume act on all of them, Restart
// stops them all, then starts them all.
func (c *RedisCluster) FaultHooks() *conformance.Faults { return eachFaults(c.Each) }

// Terminate removes every node. A nil cluster is a no-op.
func (c *RedisCluster) Terminate(ctx context.Context) error {
	if c == nil {
		return nil
	}
	return c.Each(ctx, (*Server).Terminate)
}
