package testserver

import (
	"context"
	"fmt"
	"strings"
)

// ZooKeeperImage is the image testenv/setup builds from
// testenv/images/zookeeper: ZooKeeper 3.8 from Debian, standalone or as an
// ensemble member depending on its environment.
const ZooKeeperImage = "dlock-test/zookeeper:latest"

// ZooKeeperTickMs is the tickTime of the test servers, in milliseconds. The
// server grants session timeouts from 2 to 300 ticks (0.4 s to 60 s), so the
// tests can use short sessions and stay fast.
const ZooKeeperTickMs = 200

// EnvZooKeeperURL names the environment variable that points the tests at an
// existing ZooKeeper ensemble (e.g. "zk://127.0.0.1:2181/dlock-test")
// instead of a container. Such a server has no fault hooks, the tests create
// nodes under the URL's path, and they ask for short session timeouts, which
// the server must grant (its minSessionTimeout must allow them).
const EnvZooKeeperURL = "DLOCK_TEST_ZOOKEEPER_URL"

// ZooKeeperSpec describes a standalone ZooKeeper container: the image's
// entrypoint with a short tick, and readiness by the four-letter word srvr.
func ZooKeeperSpec() Spec {
	return Spec{
		Name:  "zookeeper",
		Image: ZooKeeperImage,
		Port:  "2181/tcp",
		Env:   map[string]string{"ZK_TICK_MS": fmt.Sprint(ZooKeeperTickMs)},
		Ready: PingZooKeeper,
	}
}

// StartZooKeeper starts a standalone ZooKeeper container; see [Start].
func StartZooKeeper(ctx context.Context) (*Server, error) {
	return Start(ctx, ZooKeeperSpec())
}

// ZooKeeperTarget returns the ZooKeeper server the tests should use: the one
// named by DLOCK_TEST_ZOOKEEPER_URL when it is set (Server nil), else a new
// standalone container with URL "zk://127.0.0.1:PORT". Its signature fits
// [Main].
func ZooKeeperTarget(ctx context.Context) (Target, error) {
	return target(ctx, EnvZooKeeperURL, StartZooKeeper, func(addr string) string { return "zk://" + addr })
}

// PingZooKeeper asks the ZooKeeper server at addr for its status with the
// four-letter word srvr and succeeds once the answer names the server's mode
// ("Mode: standalone", "leader" or "follower"). ruok is not enough: it
// answers imok before the server serves sessions (an ensemble member without
// a quorum, for one). ctx bounds the whole exchange.
func PingZooKeeper(ctx context.Context, addr string) error {
	mode, err := ZooKeeperMode(ctx, addr)
	if err != nil {
		return err
	}
	if mode == "" {
		return fmt.Errorf("zookeeper srvr %s: not serving yet", addr)
	}
	return nil
}

// ZooKeeperMode returns the mode the ZooKeeper server at addr reports in its
// answer to srvr: "standalone", "leader", "follower" or "observer", or ""
// when it does not serve requests (for example an ensemble member that has
// lost its quorum).
func ZooKeeperMode(ctx context.Context, addr string) (string, error) {
	answer, err := fourLetterWord(ctx, addr, "srvr")
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(answer) {
		if mode, ok := strings.CutPrefix(strings.TrimSpace(line), "Mode:"); ok {
			return strings.TrimSpace(mode), nil
		}
	}
	return "", nil
}

// fourLetterWord sends word to the ZooKeeper server at addr over a raw
// connection (so that readiness does not depend on the client library under
// test) and returns its whole answer; the server closes the connection after
// it.
func fourLetterWord(ctx context.Context, addr, word string) (string, error) {
	answer, err := exchange(ctx, addr, word, everything)
	if err != nil {
		return "", fmt.Errorf("zookeeper %s %s: %w", word, addr, err)
	}
	return answer, nil
}
