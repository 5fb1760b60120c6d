package testserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hazelcast/hazelcast-go-client"
	"github.com/hazelcast/hazelcast-go-client/logger"
	"github.com/hazelcast/hazelcast-go-client/types"

	cerrdefs "github.com/containerd/errdefs"
)

// Hazelcast is the one backend whose server cannot be built offline: it is
// not packaged by Debian, and neither Maven Central nor a container registry
// can be reached from dlock's machines. So its tests run against
//   - the cluster DLOCK_TEST_HAZELCAST_URL names, or else
//   - the official image (HazelcastImage), started here like every other
//     server, when that image is already present locally: this package never
//     pulls it. Where a registry answers, `docker pull hazelcast/hazelcast:5.5`
//     once makes `make test` run the Hazelcast tests too.
//
// When neither is available the Hazelcast tests skip with one line saying so,
// even under DLOCK_REQUIRE_CONTAINERS=1 (see [HazelcastMain]).

// DefaultHazelcastImage is the official open-source member image the tests
// start when it is present locally.
const DefaultHazelcastImage = "hazelcast/hazelcast:5.5"

// EnvHazelcastImage names the environment variable that replaces
// DefaultHazelcastImage, e.g. with another 5.x tag already pulled.
const EnvHazelcastImage = "DLOCK_TEST_HAZELCAST_IMAGE"

// EnvHazelcastURL names the environment variable that points the tests at an
// existing cluster (e.g. "hazelcast://127.0.0.1:5701/dev?unisocket=true")
// instead of a container. Such a cluster has no fault hooks, and the tests
// take locks and write fencing counters in maps named "dlock-test*".
const EnvHazelcastURL = "DLOCK_TEST_HAZELCAST_URL"

// HazelcastCluster is the cluster name of the test member: the image's
// default.
const HazelcastCluster = "dev"

// ErrNoHazelcast is wrapped by the error of [HazelcastTarget] when there is
// no member to test against: DLOCK_TEST_HAZELCAST_URL is unset, and the image
// is not present locally (or no Docker engine answers). Its message says how
// to provide one.
var ErrNoHazelcast = errors.New("testserver: no Hazelcast member to test against")

// HazelcastImage returns the image the tests start: DLOCK_TEST_HAZELCAST_IMAGE
// or DefaultHazelcastImage.
func HazelcastImage() string {
	if img := os.Getenv(EnvHazelcastImage); img != "" {
		return img
	}
	return DefaultHazelcastImage
}

// HazelcastSpec describes a one-member cluster in the official image:
// multicast and auto-detection joins off (the member is alone), phone-home
// off (nothing leaves the machine), a small heap, and readiness by a real
// client connection. The member advertises its address inside the container,
// which the host cannot use, so clients of it connect in unisocket mode
// (one connection, to the address they were given): see [HazelcastURL].
func HazelcastSpec() Spec {
	return Spec{
		Name:  "hazelcast",
		Image: HazelcastImage(),
		Port:  "5701/tcp",
		Env: map[string]string{
			"HZ_CLUSTERNAME":                        HazelcastCluster,
			"HZ_NETWORK_JOIN_MULTICAST_ENABLED":     "false",
			"HZ_NETWORK_JOIN_AUTODETECTION_ENABLED": "false",
			"HZ_PHONE_HOME_ENABLED":                 "false",
			"JAVA_OPTS":                             "-Xms128m -Xmx512m -Dhazelcast.phone.home.enabled=false",
		},
		Ready: PingHazelcast,
		// A JVM starting on a loaded 2-core machine takes a while.
		ReadyTimeout: 2 * time.Minute,
	}
}

// HazelcastURL returns the dlock URL of the test member at addr: unisocket,
// since the member's own view of its address is not reachable from the
// host, and the client library's logging off.
func HazelcastURL(addr string) string {
	return "hazelcast://" + addr + "/" + HazelcastCluster + "?unisocket=true&log_level=off"
}

// StartHazelcast starts a one-member cluster; see [Start]. The image must be
// present locally: the error wraps [ErrNoImage] otherwise.
func StartHazelcast(ctx context.Context) (*Server, error) {
	return Start(ctx, HazelcastSpec())
}

// HazelcastTarget returns the cluster the tests should use: the one named by
// DLOCK_TEST_HAZELCAST_URL when it is set (Server nil), else a new container
// of HazelcastImage() when that image is present locally, with URL
// HazelcastURL(addr). When neither is available the error wraps
// ErrNoHazelcast, and its message (one line) says how to provide a member.
// Its signature fits [Main], but use [HazelcastMain], whose policy skips
// rather than fails then.
func HazelcastTarget(ctx context.Context) (Target, error) {
	if url := os.Getenv(EnvHazelcastURL); url != "" {
		return Target{URL: url}, nil
	}
	image := HazelcastImage()
	if err := imagePresent(ctx, image); err != nil {
		return Target{}, fmt.Errorf("%w: %s is unset and %v; to run these tests, `docker pull %s && make test` where a registry answers, or %s='%s' go test ./drivers/hazelcast/",
			ErrNoHazelcast, EnvHazelcastURL, err, image, EnvHazelcastURL, HazelcastURL("127.0.0.1:5701"))
	}
	srv, err := StartHazelcast(ctx)
	if err != nil {
		return Target{}, err
	}
	return Target{URL: HazelcastURL(srv.Addr()), Server: srv}, nil
}

// imagePresent asks the Docker engine whether image is present locally, and
// says why not otherwise. It never pulls.
func imagePresent(ctx context.Context, image string) error {
	cli, err := dockerClient(ctx)
	if err != nil {
		return fmt.Errorf("no Docker engine answers to look for image %s", image)
	}
	defer cli.Close()
	if _, err := cli.ImageInspect(ctx, image); err != nil {
		if cerrdefs.IsNotFound(err) {
			return fmt.Errorf("image %s is not present locally (testserver never pulls)", image)
		}
		return fmt.Errorf("inspect image %s: %s", image, strings.Join(strings.Fields(err.Error()), " "))
	}
	return nil
}

// HazelcastMain is TestMain for the Hazelcast tests. Its policy differs from
// [Main] in one way: when there is no member to test against (see
// [ErrNoHazelcast]), the tests that call Target.Need skip with one line
// saying why and how to run them, whether or not DLOCK_REQUIRE_CONTAINERS=1,
// because no machine of dlock's can obtain the image. When there is one
// (the variable is set, or the image is present), everything is as with Main:
// a member that fails to start fails the package.
func HazelcastMain(m *testing.M, dst *Target) {
	os.Exit(runHazelcastMain(m, dst))
}

func runHazelcastMain(m *testing.M, dst *Target) int {
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	t, err := HazelcastTarget(ctx)
	cancel()
	if errors.Is(err, ErrNoHazelcast) {
		dst.missing = err.Error()
		fmt.Fprintln(os.Stderr, dst.missing)
		return m.Run()
	}
	return runMain(m, func(context.Context) (Target, error) { return t, err }, dst)
}

// PingHazelcast connects a Hazelcast client (unisocket, cluster
// HazelcastCluster) to the member at addr and shuts it down: a TCP connect is
// not enough, since Docker's port proxy accepts before the member listens,
// and a listening member refuses clients until it has started. ctx bounds the
// whole exchange.
func PingHazelcast(ctx context.Context, addr string) error {
	cfg := hazelcast.NewConfig()
	cfg.Cluster.Name = HazelcastCluster
	cfg.Cluster.Unisocket = true
	cfg.Cluster.Network.SetAddresses(addr)
	cfg.Logger.Level = logger.OffLevel
	if deadline, ok := ctx.Deadline(); ok {
		// Without a timeout the client retries its first connection forever.
		cfg.Cluster.ConnectionStrategy.Timeout = types.Duration(max(time.Until(deadline), time.Millisecond))
	}
	client, err := hazelcast.StartNewClientWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("hazelcast client connect to %s: %w", addr, err)
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return client.Shutdown(shutdown)
}
