package testserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/dlock-go/dlock/conformance"
	"github.com/dlock-go/dlock/conformance/containerfaults"
)

// SentinelMasterName is the name under which the sentinels of
// [StartRedisSentinel] monitor the master.
const SentinelMasterName = "dlockmaster"

// SentinelDownAfter is the sentinels' down-after-milliseconds: how long a
// master must be silent before a sentinel takes it for down. It is short so
// that a failover test does not wait long, and long enough (with the quorum
// of 2) that a loaded machine's stalls do not start one.
const SentinelDownAfter = 2000

// RedisSentinel is a Redis master with replicas, watched by Redis Sentinel
// processes, one container each. Like [RedisCluster], every process runs
// on the host's network, bound to 127.0.0.1 on a port of its own: the
// addresses the sentinels hand out (the master's, the replicas') are then
// the ones a client on this machine dials, and stay the same across Stop
// and Start. Each process is a [Server] with its own fault hooks.
type RedisSentinel struct {
	// Data are the Redis servers: Data[0] is the master at the start, the
	// others its replicas. A failover changes which one is master.
	Data []*Server
	// Sentinels watch the master under [SentinelMasterName].
	Sentinels []*Server
}

// StartRedisSentinel starts a master, replicas replicas of it and
// sentinels sentinels (quorum 2), and returns once every replica's link to
// the master is up and every sentinel knows the master, every replica and
// every other sentinel. On failure it removes what it started. The caller
// terminates the whole with [RedisSentinel.Terminate].
func StartRedisSentinel(ctx context.Context, replicas, sentinels int) (*RedisSentinel, error) {
	if replicas < 1 || sentinels < 2 {
		return nil, fmt.Errorf("testserver: Sentinel with %d replicas and %d sentinels: want at least 1 and 2", replicas, sentinels)
	}
	if err := prepare(ctx, RedisImage); err != nil {
		return nil, err
	}
	r := &RedisSentinel{}
	// The master first: its port goes into every other process's command.
	master, err := startHostRedis(ctx, "redis-master", dataNodeReady, func(port int) ([]string, error) {
		return dataNodeCmd(port, 0), nil
	})
	if err != nil {
		return nil, err
	}
	r.Data = append(r.Data, master)
	masterPort := hostPort(master)
	others, err := startEach(replicas+sentinels, func(i int) (*Server, error) {
		if i < replicas {
			return startHostRedis(ctx, fmt.Sprintf("redis-replica%d", i), dataNodeReady, func(port int) ([]string, error) {
				return dataNodeCmd(port, masterPort), nil
			})
		}
		ready := func(ctx context.Context, addr string) error { return sentinelReady(ctx, addr, replicas, sentinels) }
		return startHostRedis(ctx, fmt.Sprintf("redis-sentinel%d", i-replicas), ready, func(port int) ([]string, error) {
			return sentinelCmd(port, masterPort), nil
		})
	})
	for i, s := range others {
		if i < replicas {
			r.Data = append(r.Data, s)
		} else {
			r.Sentinels = append(r.Sentinels, s)
		}
	}
	if err != nil {
		_ = r.Terminate(context.WithoutCancel(ctx))
		return nil, err
	}
	return r, nil
}

// startHostRedis starts a redis-server container on the host's network, on
// a free port of 127.0.0.1 that cmd puts in its command line (with other
// ports it finds free, if it needs them), and waits until ready says it
// serves. Ports are found free by binding them, then released for the
// server: when another process takes one meanwhile, the server fails to
// bind and the start is retried on new ports.
func startHostRedis(ctx context.Context, name string, ready func(context.Context, string) error, cmd func(port int) ([]string, error)) (*Server, error) {
	var lastErr error
	for range 3 {
		port, err := containerfaults.FreePort()
		var args []string
		if err == nil {
			args, err = cmd(port)
		}
		if err != nil {
			lastErr = err
			continue
		}
		spec := Spec{Name: name, Image: RedisImage, Port: strconv.Itoa(port) + "/tcp", Cmd: args, Ready: ready}
		ctr, err := runHostNetwork(ctx, spec, port)
		if err != nil {
			lastErr = err
			continue
		}
		s, err := newServer(ctx, spec, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), ctr)
		if err == nil {
			err = s.ready(ctx)
		}
		if err != nil {
			lastErr = err
			continue
		}
		return s, nil
	}
	return nil, fmt.Errorf("testserver: start %s: %w", name, lastErr)
}

// hostPort is the port of s's address.
func hostPort(s *Server) int {
	_, p, _ := net.SplitHostPort(s.Addr())
	n, _ := strconv.Atoi(p)
	return n
}

// dataNodeCmd is the command of a Redis server on port, a replica of the
// server on masterPort unless that is 0. No persistence, as the image's own
// command: a restarted server starts empty, in the role its command gives
// it, and the sentinels (restarted with it by the fault hooks) agree.
func dataNodeCmd(port, masterPort int) []string {
	cmd := []string{"redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(port),
		"--protected-mode", "no", "--daemonize", "no", "--save", "", "--appendonly", "no"}
	if masterPort != 0 {
		cmd = append(cmd, "--replicaof", "127.0.0.1", strconv.Itoa(masterPort))
	}
	return cmd
}

// sentinelCmd is the command of a sentinel on port that watches the master
// on masterPort. A sentinel rewrites its configuration file as it learns,
// so the file is written afresh at every start of the container: a
// restarted sentinel starts from the first topology, as the data nodes do.
func sentinelCmd(port, masterPort int) []string {
	conf := strings.Join([]string{
		"port " + strconv.Itoa(port),
		"bind 127.0.0.1",
		"protected-mode no",
		"daemonize no",
		fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 2", SentinelMasterName, masterPort),
		fmt.Sprintf("sentinel down-after-milliseconds %s %d", SentinelMasterName, SentinelDownAfter),
		// Long enough for a failover on a loaded machine; it also spaces
		// a second failover of the same master after this one.
		fmt.Sprintf("sentinel failover-timeout %s 10000", SentinelMasterName),
	}, "\n")
	return []string{"sh", "-c", "printf '%s\\n' \"$0\" > /tmp/sentinel.conf && exec redis-server /tmp/sentinel.conf --sentinel", conf}
}

// dataNodeReady succeeds when the Redis server at addr is a master, or a
// replica whose link to its master is up.
func dataNodeReady(ctx context.Context, addr string) error {
	info, err := redisInfo(ctx, addr, "replication")
	if err != nil {
		return err
	}
	if strings.Contains(info, "role:master") || strings.Contains(info, "master_link_status:up") {
		return nil
	}
	return fmt.Errorf("redis %s: a replica whose link to its master is not up yet", addr)
}

// sentinelReady succeeds when the sentinel at addr knows the master (its
// INFO sentinel line has an address and status ok, which is what SENTINEL
// get-master-addr-by-name answers from), replicas replicas and sentinels
// sentinels, itself included.
func sentinelReady(ctx context.Context, addr string, replicas, sentinels int) error {
	info, err := redisInfo(ctx, addr, "sentinel")
	if err != nil {
		return err
	}
	for line := range strings.SplitSeq(info, "\n") {
		if !strings.Contains(line, "name="+SentinelMasterName+",") {
			continue
		}
		want := fmt.Sprintf(",slaves=%d,sentinels=%d", replicas, sentinels)
		if strings.Contains(line, "status=ok,") && strings.Contains(line, want) {
			return nil
		}
		return fmt.Errorf("redis sentinel %s: %q, want status ok and %s", addr, strings.TrimSpace(line), want)
	}
	return fmt.Errorf("redis sentinel %s: does not know the master yet", addr)
}

// redisInfo sends INFO section to the Redis server (or sentinel) at addr
// over a raw connection, so that readiness does not depend on the client
// library under test, and returns the reply's text.
func redisInfo(ctx context.Context, addr, section string) (string, error) {
	return exchange(ctx, addr, "INFO "+section+"\r\n", func(r *bufio.Reader) (string, error) {
		head, err := firstLine(r)
		if err != nil {
			return "", err
		}
		size, err := strconv.Atoi(strings.TrimPrefix(head, "$"))
		if !strings.HasPrefix(head, "$") || err != nil || size < 0 {
			return "", fmt.Errorf("redis INFO %s at %s: got %q", section, addr, head)
		}
		body := make([]byte, size)
		_, err = io.ReadFull(r, body)
		return string(body), err
	})
}

// DataAddrs returns the Redis servers' addresses, "127.0.0.1:PORT", in the
// order of Data.
func (r *RedisSentinel) DataAddrs() []string { return addrsOf(r.Data) }

// SentinelAddrs returns the sentinels' addresses, "127.0.0.1:PORT".
func (r *RedisSentinel) SentinelAddrs() []string { return addrsOf(r.Sentinels) }

// URL returns the dlock URL of the deployment,
// "redis+sentinel://SENTINEL,SENTINEL,.../MASTERNAME/0".
func (r *RedisSentinel) URL() string {
	return "redis+sentinel://" + strings.Join(r.SentinelAddrs(), ",") + "/" + SentinelMasterName + "/0"
}

// Master returns the index in Data of the server at the address the
// sentinels report for the master, asked of each sentinel in turn until
// one answers (INFO sentinel).
func (r *RedisSentinel) Master(ctx context.Context) (int, error) {
	var errs []error
	for _, s := range r.Sentinels {
		info, err := redisInfo(ctx, s.Addr(), "sentinel")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for i, d := range r.Data {
			if strings.Contains(info, "name="+SentinelMasterName+",status=ok,address="+d.Addr()+",") {
				return i, nil
			}
		}
		errs = append(errs, fmt.Errorf("redis sentinel %s: no master with status ok among %v", s.Addr(), r.DataAddrs()))
	}
	return -1, errors.Join(errs...)
}

// Each runs f on every process, data nodes and sentinels, at once and joins
// the errors.
func (r *RedisSentinel) Each(ctx context.Context, f func(*Server, context.Context) error) error {
	return eachServer(ctx, append(append([]*Server(nil), r.Data...), r.Sentinels...), f)
}

// FaultHooks returns the hooks of the whole deployment for a conformance
// Harness, every process at once: pausing the sentinels with the data nodes
// keeps them from failing over while the backend is frozen, and a restart
// starts every process afresh in its first role.
func (r *RedisSentinel) FaultHooks() *conformance.Faults { return eachFaults(r.Each) }

// Terminate removes every process. A nil deployment is a no-op.
func (r *RedisSentinel) Terminate(ctx context.Context) error {
	if r == nil {
		return nil
	}
	return r.Each(ctx, (*Server).Terminate)
}

// WaitSettled waits until the deployment is whole again after a failover or
// a fault: one data node is a master, every other one a replica whose link
// is up, and every sentinel reports that master with status ok. It returns
// the master's index in Data. ctx bounds the wait.
func (r *RedisSentinel) WaitSettled(ctx context.Context) (int, error) {
	for {
		master, err := r.settled(ctx)
		if err == nil {
			return master, nil
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("testserver: Sentinel deployment not settled: %w (%w)", err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// settled is one check of WaitSettled.
func (r *RedisSentinel) settled(ctx context.Context) (int, error) {
	probe, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	master := -1
	for i, d := range r.Data {
		info, err := redisInfo(probe, d.Addr(), "replication")
		switch {
		case err != nil:
			return -1, err
		case strings.Contains(info, "role:master") && master == -1:
			master = i
		case !strings.Contains(info, "master_link_status:up"):
			return -1, fmt.Errorf("redis %s: neither the one master nor a linked replica", d.Addr())
		}
	}
	if master == -1 {
		return -1, errors.New("no master")
	}
	for _, s := range r.Sentinels {
		if err := sentinelReady(probe, s.Addr(), len(r.Data)-1, len(r.Sentinels)); err != nil {
			return -1, err
		}
		info, err := redisInfo(probe, s.Addr(), "sentinel")
		if err != nil {
			return -1, err
		}
		if !strings.Contains(info, ",address="+r.Data[master].Addr()+",") {
			return -1, fmt.Errorf("redis sentinel %s does not report %s as the master yet", s.Addr(), r.Data[master].Addr())
		}
	}
	return master, nil
}
