package benchtargets

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/benchkit"
)

// ZooKeeperTarget is the ZooKeeper server at rawURL (zk://host:port/...; the
// zookeeper driver must be imported). The driver accepts TTLs from one to two
// session timeouts, so clients get a TTL of 1.5 session timeouts, and the
// held-locks measurement one session timeout at least. Raw is the create of
// an ephemeral sequential node and its delete, on a session of its own: the
// two synced writes a lock needs at the least. Requests are the packets the
// first server received (the four-letter word mntr), so on a dedicated
// server they are the benchmark's own; session pings count too, a few per
// second. The returned func closes the raw session.
func ZooKeeperTarget(rawURL string, sessionTTL time.Duration) (benchkit.Target, func(), error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return benchkit.Target{}, nil, fmt.Errorf("want zk://host:port[,host:port]/..., got %q", rawURL)
	}
	servers := strings.Split(u.Host, ",")
	conn, err := ZooKeeperSession(servers, sessionTTL)
	if err != nil {
		return benchkit.Target{}, nil, err
	}
	dir := "/dlock-bench-raw"
	if _, err := conn.Create(dir, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		conn.Close()
		return benchkit.Target{}, nil, err
	}
	t := benchkit.Target{
		Name: "zookeeper",
		NewClient: func(ctx context.Context, opts ...dlock.Option) (*dlock.Client, error) {
			return dlock.Open(ctx, rawURL, append([]dlock.Option{dlock.WithTTL(sessionTTL * 3 / 2)}, opts...)...)
		},
		Raw: func(context.Context, string) error {
			p, err := conn.Create(dir+"/n-", nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
			if err != nil {
				return err
			}
			return conn.Delete(p, -1)
		},
		Requests: func() uint64 { return zkPacketsReceived(servers[0]) },
		MinTTL:   sessionTTL,
	}
	return t, conn.Close, nil
}

// ZooKeeperSession connects to servers and waits for a session, for 30 s at
// most.
func ZooKeeperSession(servers []string, sessionTTL time.Duration) (*zk.Conn, error) {
	conn, events, err := zk.Connect(servers, sessionTTL, zk.WithLogInfo(false))
	if err != nil {
		return nil, err
	}
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return conn, nil
			}
		case <-timeout:
			conn.Close()
			return nil, fmt.Errorf("zookeeper %v: no session within 30 s", servers)
		}
	}
}

// zkPacketsReceived returns the zk_packets_received counter of the server at
// addr, or 0 when it cannot be read.
func zkPacketsReceived(addr string) uint64 {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "mntr"); err != nil {
		return 0
	}
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), "\t")
		if ok && name == "zk_packets_received" {
			n, _ := strconv.ParseUint(strings.TrimSpace(value), 10, 64)
			return n
		}
	}
	return 0
}
