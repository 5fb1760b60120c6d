package testserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/hazelcast/hazelcast-go-client"
	"github.com/hazelcast/hazelcast-go-client/logger"
	"github.com/hazelcast/hazelcast-go-client/types"

	"github.com/dlock-go/dlock/conformance/containerfaults"

	cerrdefs "github.com/containerd/errdefs"
)

// Hazelcast's member is not packaged by Debian: testenv/setup fetches the
// open-source member jar from Maven Central with Maven and builds
// HazelcastImage from testenv/images/hazelcast around it. Where Maven Central
// cannot be reached, setup skips that image and leaves the reason in
// HazelcastUnavailableFile; then, and only then, the Hazelcast tests skip
// with that reason (see [HazelcastMain]). Otherwise they run like every other
// driver's, against a container, or against the cluster
// DLOCK_TEST_HAZELCAST_URL names.

// DefaultHazelcastImage is the image testenv/setup builds from
// testenv/images/hazelcast: a Hazelcast 5.5.0 member on Debian's JRE.
const DefaultHazelcastImage = "dlock-test/hazelcast:latest"

// EnvHazelcastImage names the environment variable that replaces
// DefaultHazelcastImage, e.g. with an official hazelcast/hazelcast image
// configured alike.
const EnvHazelcastImage = "DLOCK_TEST_HAZELCAST_IMAGE"

// EnvHazelcastURL names the environment variable that points the tests at an
// existing cluster (e.g. "hazelcast://127.0.0.1:5701/dev?unisocket=true")
// instead of a container. Such a cluster has no fault hooks, and the tests
// take locks and write fencing counters in maps named "dlock-test*".
const EnvHazelcastURL = "DLOCK_TEST_HAZELCAST_URL"

// HazelcastCluster is the cluster name of the test members.
const HazelcastCluster = "dev"

// ErrNoHazelcast is wrapped by the error of [HazelcastTarget] when there is
// no member to test against because testenv/setup could not build the image
// (Maven Central could not be reached); its message, one line, says why.
var ErrNoHazelcast = errors.New("testserver: no Hazelcast member to test against")

// HazelcastImage returns the image the tests start: DLOCK_TEST_HAZELCAST_IMAGE
// or DefaultHazelcastImage.
func HazelcastImage() string {
	if img := os.Getenv(EnvHazelcastImage); img != "" {
		return img
	}
	return DefaultHazelcastImage
}

// HazelcastUnavailableFile returns the file in which testenv/setup leaves
// the reason it could not build the image of testenv/images/hazelcast, or ""
// when there is no cache directory.
func HazelcastUnavailableFile() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "dlock-testenv", "hazelcast.unavailable")
}

// HazelcastSpec describes a lone member (the image's entrypoint: multicast
// and auto-detection off, phone-home off, a small heap), ready once a real
// client connects. The member advertises its address inside the container,
// which the host cannot use, so clients of it connect in unisocket mode (one
// connection, to the address they were given): see [HazelcastURL].
func HazelcastSpec() Spec {
	return Spec{
		Name:  "hazelcast",
		Image: HazelcastImage(),
		Port:  "5701/tcp",
		Env:   map[string]string{"HZ_CLUSTER": HazelcastCluster},
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

// StartHazelcast starts a lone member; see [Start].
func StartHazelcast(ctx context.Context) (*Server, error) {
	return Start(ctx, HazelcastSpec())
}

// HazelcastTarget returns the cluster the tests should use: the one named by
// DLOCK_TEST_HAZELCAST_URL when it is set (Server nil), else a new container
// of HazelcastImage() with URL HazelcastURL(addr). When the image is missing
// because testenv/setup could not fetch the member from Maven Central, the
// error wraps ErrNoHazelcast and says so in one line; a missing image
// without that reason wraps ErrNoImage, as for any other server.
func HazelcastTarget(ctx context.Context) (Target, error) {
	if url := os.Getenv(EnvHazelcastURL); url != "" {
		return Target{URL: url}, nil
	}
	if reason := hazelcastUnavailable(ctx); reason != "" {
		return Target{}, fmt.Errorf("%w: %s; to run these tests, run `bash testenv/setup` where Maven Central answers, or set %s='%s'",
			ErrNoHazelcast, reason, EnvHazelcastURL, HazelcastURL("127.0.0.1:5701"))
	}
	srv, err := StartHazelcast(ctx)
	if err != nil {
		return Target{}, err
	}
	return Target{URL: HazelcastURL(srv.Addr()), Server: srv}, nil
}

// hazelcastUnavailable returns why testenv/setup could not build the image,
// as it left it, when the image is indeed missing; "" otherwise (the image
// is present, no engine answers, or it is missing for no known reason: then
// Start reports that).
func hazelcastUnavailable(ctx context.Context) string {
	file := HazelcastUnavailableFile()
	if file == "" {
		return ""
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	cli, err := dockerClient(ctx)
	if err != nil {
		return ""
	}
	defer cli.Close()
	image := HazelcastImage()
	if _, err := cli.ImageInspect(ctx, image); !cerrdefs.IsNotFound(err) {
		return ""
	}
	return fmt.Sprintf("image %s was not built: %s", image, strings.Join(strings.Fields(string(b)), " "))
}

// HazelcastMain is TestMain for the Hazelcast tests. It is [Main] with
// HazelcastTarget, except that when the image could not be built because
// Maven Central could not be reached (see [ErrNoHazelcast]), the tests that
// call Target.Need skip with one line saying why, whether or not
// DLOCK_REQUIRE_CONTAINERS=1.
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
//
// A client whose start fails leaks a goroutine in hazelcast-go-client v1.6.0
// (newClient starts its schema invoker, which only Shutdown ends, and
// StartNewClientWithConfig returns no client to shut down), and a member
// still starting fails a few probes. So the probe runs in a goroutine
// without the caller's profiler labels: what it leaks belongs to the test
// server's probe, not to the test (such as a conformance case, whose leak
// check goes by label) that restarted the server.
func PingHazelcast(ctx context.Context, addr string) error {
	done := make(chan error, 1)
	go func() {
		pprof.SetGoroutineLabels(context.Background())
		done <- pingHazelcast(ctx, addr)
	}()
	return <-done
}

func pingHazelcast(ctx context.Context, addr string) error {
	client, err := connectHazelcast(ctx, addr)
	if err != nil {
		return err
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return client.Shutdown(shutdown)
}

// connectHazelcast starts a unisocket client of the member at addr, bounded
// by ctx, with the library's logging off.
func connectHazelcast(ctx context.Context, addr string) (*hazelcast.Client, error) {
	return connectHazelcastWith(ctx, hazelcastProbeConfig(ctx, addr))
}

// hazelcastProbeConfig is the configuration of a unisocket client of the
// member at addr, whose first connection ctx bounds, with the library's
// logging off.
func hazelcastProbeConfig(ctx context.Context, addr string) hazelcast.Config {
	cfg := hazelcast.NewConfig()
	cfg.Cluster.Name = HazelcastCluster
	cfg.Cluster.Unisocket = true
	cfg.Cluster.Network.SetAddresses(addr)
	cfg.Logger.Level = logger.OffLevel
	if deadline, ok := ctx.Deadline(); ok {
		// Without a timeout the client retries its first connection forever.
		cfg.Cluster.ConnectionStrategy.Timeout = types.Duration(max(time.Until(deadline), time.Millisecond))
	}
	return cfg
}

// connectHazelcastWith starts a client with cfg, bounded by ctx.
func connectHazelcastWith(ctx context.Context, cfg hazelcast.Config) (*hazelcast.Client, error) {
	addr := strings.Join(cfg.Cluster.Network.Addresses, ",")
	client, err := hazelcast.StartNewClientWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("hazelcast client connect to %s: %w", addr, err)
	}
	return client, nil
}

// HazelcastFront stands in front of a test member, as its host would: the
// tests' clients dial [HazelcastFront.Addr], a [containerfaults.Proxy] in the test process
// to the member's published port, and [HazelcastFront.Stop],
// [HazelcastFront.Start] and [HazelcastFront.Restart] take the member down
// and bring it back with that address refusing connections all along, until
// the member answers a client again.
//
// The tests need it because Docker's port proxy (docker-proxy), which
// publishes the member's port, is no such host: it listens from the moment
// the container starts, accepts connections before the member inside
// listens, and closes them when the member does not answer.
// hazelcast-go-client v1.6.0 reconnects under context.Background(), so its
// sign-in on a new connection has no time limit, and a connection that
// closes at once can leave that sign-in waiting for good: the client fails
// a closed connection's requests once, when it handles the close, and a
// sign-in request it queues on the connection after that (the connection's
// send picks at random between "closed" and its queue) is never answered
// nor failed. About one member restart in ten behind Docker's port proxy
// left a client disconnected for good that way. A load balancer in front of
// members can do the same, which the driver's package doc says under
// Limitations; the tests measure the driver's reconnection to a member that
// went down and came back, not that artefact.
//
// Through the front, what a client sees of a restart is what a member's own
// host shows it: its connection closes, its dials are refused while the
// member is down and starting, and the first connection accepted is one the
// member answers. The member's readiness is probed on its published port
// directly ([Server.Start] waits for [PingHazelcast]), never through the
// front. Pause and Resume of the member need no front: a paused member's
// connections stay open and silent either way.
type HazelcastFront struct {
	srv   *Server
	proxy *containerfaults.Proxy
}

// NewHazelcastFront starts a front for the member srv; it is closed when
// tb's test ends.
func NewHazelcastFront(tb testing.TB, srv *Server) *HazelcastFront {
	tb.Helper()
	f, err := StartHazelcastFront(srv)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = f.Close() })
	return f
}

// StartHazelcastFront starts a front for the member srv, on a free port of
// 127.0.0.1 that stays its own across restarts. The caller closes it.
func StartHazelcastFront(srv *Server) (*HazelcastFront, error) {
	if !srv.Faults() {
		return nil, errors.New("testserver: a Hazelcast front needs a member in a container")
	}
	p, err := containerfaults.StartRefusableProxy(srv.Addr())
	if err != nil {
		return nil, err
	}
	return &HazelcastFront{srv: srv, proxy: p}, nil
}

// Addr is the address (host:port) clients dial to reach the member.
func (f *HazelcastFront) Addr() string { return f.proxy.Addr() }

// Stop closes every connection through the front and refuses new ones, as
// the member's host does when the member is gone, then stops the member
// ([Server.Stop]). The front refuses first so that no client connects
// while the member shuts down.
func (f *HazelcastFront) Stop(ctx context.Context) error {
	if err := f.proxy.Refuse(); err != nil {
		return err
	}
	return f.srv.Stop(ctx)
}

// Start starts the member again ([Server.Start], which waits until it
// answers a client on its published port), and only then accepts
// connections at the front again.
func (f *HazelcastFront) Start(ctx context.Context) error {
	if err := f.srv.Start(ctx); err != nil {
		return err
	}
	return f.proxy.Reopen()
}

// Restart is Stop, then Start: it returns once the member answers clients
// through the front again.
func (f *HazelcastFront) Restart(ctx context.Context) error {
	if err := f.Stop(ctx); err != nil {
		return err
	}
	return f.Start(ctx)
}

// Close closes the front and every connection through it; the member is
// left as it is. It may be called more than once.
func (f *HazelcastFront) Close() error { return f.proxy.Close() }
