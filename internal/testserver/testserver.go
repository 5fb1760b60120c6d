// Package testserver runs the real servers that dlock's driver tests talk to,
// one Docker container per test package, and gives tests fault hooks on it:
// pause (the server freezes and connections hang), stop (the server is gone
// and its port refuses connections) and start again on the same address.
// The fault hooks are those of package containerfaults, which drivers outside
// this repository use too; [Target.FaultHooks] gives them to the conformance
// suite.
//
// The images are built locally by testenv/setup (there is no registry to pull
// from), so run `bash testenv/setup` once before the tests.
//
// A driver test package starts its server from TestMain with [Main]:
//
//	var redis testserver.Target
//
//	func TestMain(m *testing.M) { testserver.Main(m, testserver.RedisTarget, &redis) }
//
//	func TestLock(t *testing.T) {
//		redis.Need(t) // skips when no Docker engine answers and containers are optional
//		client := newClient(redis.URL)
//		...
//	}
//
//	func TestServerFreezes(t *testing.T) {
//		redis.NeedFaults(t) // skips against an external server (DLOCK_TEST_REDIS_URL)
//		if err := redis.Server.Pause(ctx); err != nil { t.Fatal(err) }
//		defer redis.Server.Resume(ctx)
//		...
//	}
//
// When no Docker engine answers, [Main] lets the tests that call Need skip,
// unless DLOCK_REQUIRE_CONTAINERS=1 (set by `make test`): then the package
// fails, so that CI can never pass by skipping everything.
//
// Containers are started with Ryuk (testcontainers' reaper) disabled, since
// its image cannot be pulled here. Instead, [Main] terminates the container
// when the tests end or the process is interrupted, and [Start] removes
// containers left behind by test processes that died (for example on a
// `go test -timeout` panic).
package testserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tcnetwork "github.com/testcontainers/testcontainers-go/network"

	"github.com/dlock-go/dlock/conformance"
	"github.com/dlock-go/dlock/conformance/containerfaults"
)

// ErrNoDocker is wrapped by the error [Start] returns when no Docker engine
// answers, so that callers can tell "this machine cannot run containers"
// (skip, unless [Require]) from a real failure of the server (fail).
var ErrNoDocker = errors.New("testserver: no Docker engine answers (run `bash testenv/setup`)")

// ErrNoImage is wrapped by the error [Start] returns when the image is not
// present locally. testserver never pulls: there is no registry to pull from,
// and testenv/setup is what builds the images.
var ErrNoImage = errors.New("testserver: image not present locally (run `bash testenv/setup`)")

// EnvRequire names the environment variable that, set to "1", makes a
// missing Docker engine fail the tests instead of skipping them.
const EnvRequire = "DLOCK_REQUIRE_CONTAINERS"

// Require reports whether containers are mandatory for this run
// (DLOCK_REQUIRE_CONTAINERS=1, as `make test` sets it). Then a missing Docker
// engine is an error, not a reason to skip.
func Require() bool { return os.Getenv(EnvRequire) == "1" }

// Labels put on every container this package starts. The owner labels let a
// later [Start] find and remove containers whose test process has died.
const (
	labelName      = "dlock.testserver"
	labelOwnerPID  = "dlock.testserver.pid"
	labelOwnerHost = "dlock.testserver.host"
)

// Spec describes a server to run in a container.
type Spec struct {
	// Name is a short name ("redis") for messages and the container's name.
	Name string
	// Image is a local image, e.g. "dlock-test/redis:latest".
	Image string
	// Port is the server's port inside the container, e.g. "6379/tcp".
	Port string
	// Cmd, if not empty, replaces the image's command.
	Cmd []string
	// Env is added to the container's environment.
	Env map[string]string
	// Ready returns nil once the server at addr ("127.0.0.1:PORT") answers a
	// real request of its protocol. A TCP connect is not enough: Docker's port
	// proxy accepts connections before the server inside listens. It is called
	// in a loop, each call bounded by a short context deadline.
	Ready func(ctx context.Context, addr string) error
	// ReadyTimeout bounds the wait for Ready; zero means
	// containerfaults.DefaultReadyTimeout.
	ReadyTimeout time.Duration
}

// Server is a running server container that tests may inject faults into:
// the fault hooks of a [containerfaults.Container] (Pause, Resume, Stop,
// Start, Restart), with Spec.Ready as their readiness check.
// Its methods are safe for concurrent use; fault operations are serialised.
type Server struct {
	spec   Spec
	addr   string
	ctr    *testcontainers.DockerContainer
	faults *containerfaults.Container
}

// newServer returns the Server of ctr, a started container of spec whose
// port is published on addr, without waiting for it to be ready. The
// container is terminated when this fails.
func newServer(ctx context.Context, spec Spec, addr string, ctr *testcontainers.DockerContainer) (*Server, error) {
	c, err := containerfaults.New(ctx, ctr, func(ctx context.Context) error { return spec.Ready(ctx, addr) })
	if err != nil {
		_ = ctr.Terminate(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("testserver: %s: %w", spec.Name, err)
	}
	c.ReadyTimeout = spec.ReadyTimeout
	return &Server{spec: spec, addr: addr, ctr: ctr, faults: c}, nil
}

// ready waits until s is ready; when it is not, it terminates s and returns
// why, with the end of the container's log.
func (s *Server) ready(ctx context.Context) error {
	if err := s.waitReady(ctx); err != nil {
		err = fmt.Errorf("%w%s", err, s.logTail(ctx))
		_ = s.Terminate(context.WithoutCancel(ctx))
		return err
	}
	return nil
}

// The defaults are set when the package loads, so that every path into
// testcontainers (single servers, groups, clusters) sees them before
// testcontainers reads its configuration, which it does once per process.
func init() { setTestcontainersDefaults() }

// setTestcontainersDefaults sets the environment testcontainers needs here.
var setTestcontainersDefaults = sync.OnceFunc(func() {
	// The reaper image cannot be pulled on our machines.
	setenvDefault("TESTCONTAINERS_RYUK_DISABLED", "true")
	// In a container (/.dockerenv exists) testcontainers would otherwise
	// address published ports through the bridge gateway, not loopback.
	setenvDefault("TESTCONTAINERS_HOST_OVERRIDE", "localhost")
})

func setenvDefault(key, value string) {
	if _, ok := os.LookupEnv(key); !ok {
		_ = os.Setenv(key, value)
	}
}

// Start starts spec's image in a new container, publishes spec.Port on a
// fixed free port of 127.0.0.1 (fixed so that the address survives
// [Server.Stop] and [Server.Start]), and waits until spec.Ready succeeds.
// The error wraps [ErrNoDocker] when no Docker engine answers and
// [ErrNoImage] when the image has not been built.
func Start(ctx context.Context, spec Spec) (*Server, error) {
	if spec.Name == "" || spec.Image == "" || spec.Port == "" || spec.Ready == nil {
		return nil, errors.New("testserver: Spec needs Name, Image, Port and Ready")
	}
	if _, err := network.ParsePort(spec.Port); err != nil {
		return nil, fmt.Errorf("testserver: bad Spec.Port %q: %w", spec.Port, err)
	}
	if err := prepare(ctx, spec.Image); err != nil {
		return nil, err
	}
	s, err := startAt(ctx, func(int) Spec { return spec })
	if err != nil {
		return nil, err
	}
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// prepare checks that a Docker engine answers and that image is present, and
// removes containers of dead test processes, then the networks they made
// for clusters named as orphanNetworks says ([removeOrphanNetworks]).
func prepare(ctx context.Context, image string, orphanNetworks ...string) error {
	setTestcontainersDefaults()
	cli, err := dockerClient(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	if _, err := cli.ImageInspect(ctx, image); err != nil {
		if cerrdefs.IsNotFound(err) {
			return fmt.Errorf("%w: %s", ErrNoImage, image)
		}
		return fmt.Errorf("testserver: inspect image %s: %w", image, err)
	}
	removeOrphans(ctx, cli)
	for _, name := range orphanNetworks {
		removeOrphanNetworks(ctx, cli, name)
	}
	return nil
}

// clusterNetwork prepares the start of a cluster of image's containers
// ([prepare], with the orphan networks named orphans) and makes the Docker
// network of its own where the members reach each other by name, labelled
// name as this process's.
func clusterNetwork(ctx context.Context, image, name, orphans string) (*testcontainers.DockerNetwork, error) {
	if err := prepare(ctx, image, orphans); err != nil {
		return nil, err
	}
	nw, err := tcnetwork.New(ctx, tcnetwork.WithLabels(ownerLabels(name)))
	if err != nil {
		return nil, fmt.Errorf("testserver: create a network for the %s: %w", name, err)
	}
	return nw, nil
}

// startAt starts the container that spec(hostPort) describes, its port
// published on a free hostPort of 127.0.0.1 picked first (spec may put it in
// the server's command, as a member that advertises it does), without
// waiting for readiness. The port is found free by binding and releasing
// it, so another process can take it before Docker binds it: the start is
// retried with a new one then.
func startAt(ctx context.Context, spec func(hostPort int) Spec, extra ...testcontainers.ContainerCustomizer) (*Server, error) {
	var s Spec
	var ctr *testcontainers.DockerContainer
	var hostPort int
	var err error
	for attempt := 1; ; attempt++ {
		hostPort, err = containerfaults.FreePort()
		if err == nil {
			s = spec(hostPort)
			ctr, err = run(ctx, s, hostPort, extra...)
		}
		if err == nil || attempt == 3 || !isPortConflict(err) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("testserver: start %s: %w", s.Name, err)
	}
	return newServer(ctx, s, net.JoinHostPort("127.0.0.1", strconv.Itoa(hostPort)), ctr)
}

// dockerClient returns a client of the engine testcontainers would use, or
// an error wrapping ErrNoDocker. testcontainers itself does not fail early
// when no engine answers, so this asks with a ping of its own.
func dockerClient(ctx context.Context) (*testcontainers.DockerClient, error) {
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoDocker, err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(pingCtx, client.PingOptions{}); err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("%w: %v", ErrNoDocker, err)
	}
	return cli, nil
}

// run runs spec's container, named and labelled as this package's, its port
// published on hostPort of 127.0.0.1 for every start ([containerfaults.PublishOn]),
// with the extra customizers (a network, capabilities) last.
func run(ctx context.Context, spec Spec, hostPort int, extra ...testcontainers.ContainerCustomizer) (*testcontainers.DockerContainer, error) {
	opts := []testcontainers.ContainerCustomizer{
		testcontainers.WithName(fmt.Sprintf("dlock-test-%s-%d", spec.Name, hostPort)),
		withOwnerLabels(spec.Name),
		containerfaults.PublishOn(spec.Port, hostPort),
	}
	if len(spec.Cmd) > 0 {
		opts = append(opts, testcontainers.WithCmd(spec.Cmd...))
	}
	if len(spec.Env) > 0 {
		opts = append(opts, testcontainers.WithEnv(spec.Env))
	}
	opts = append(opts, extra...)
	ctr, err := testcontainers.Run(ctx, spec.Image, opts...)
	if err != nil {
		if ctr != nil { // created but not started: do not leave it behind
			_ = ctr.Terminate(context.WithoutCancel(ctx))
		}
		return nil, err
	}
	return ctr, nil
}

// withOwnerLabels labels a container (or network) of this package's, named
// name, with the process that owns it, so that a later [Start] can remove
// what a dead test process left behind.
func withOwnerLabels(name string) testcontainers.CustomizeRequestOption {
	return testcontainers.WithLabels(ownerLabels(name))
}

// ownerLabels are the labels of withOwnerLabels.
func ownerLabels(name string) map[string]string {
	host, _ := os.Hostname()
	return map[string]string{
		labelName:      name,
		labelOwnerPID:  strconv.Itoa(os.Getpid()),
		labelOwnerHost: host,
	}
}

func isPortConflict(err error) bool {
	s := err.Error()
	return strings.Contains(s, "port is already allocated") || strings.Contains(s, "address already in use")
}

// removeOrphans removes containers that this package started from test
// processes of this host that no longer run. Ryuk is disabled, so nothing
// else cleans up after a test binary that was killed or timed out.
func removeOrphans(ctx context.Context, cli *testcontainers.DockerClient) {
	host, _ := os.Hostname()
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", labelOwnerHost+"="+host),
	})
	if err != nil {
		return
	}
	for _, c := range list.Items {
		if !orphaned(c.Labels) {
			continue
		}
		_, _ = cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	}
}

// orphaned reports whether the labels of a container or network name a test
// process of this host (the caller filtered on the host label) that no
// longer runs.
func orphaned(labels map[string]string) bool {
	pid, err := strconv.Atoi(labels[labelOwnerPID])
	return err == nil && pid > 0 && !processAlive(pid)
}

// processAlive reports whether pid runs. A zombie counts as dead: a killed
// test binary whose parent has not reaped it yet has left its tests for good.
func processAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true // no procfs to ask: trust kill
	}
	// The state follows the command name, which is in parentheses.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}

// Addr returns the server's address, "127.0.0.1:PORT". It stays the same
// across [Server.Stop] and [Server.Start].
func (s *Server) Addr() string { return s.addr }

// Name returns Spec.Name.
func (s *Server) Name() string { return s.spec.Name }

// Faults reports whether fault hooks work on s: true for a container this
// package runs, false for a nil *Server (an external server, see [Target]).
func (s *Server) Faults() bool { return s != nil && s.ctr != nil }

// FaultHooks returns the fault hooks of s as the conformance suite takes
// them (pause, resume, restart), or nil for a nil *Server (an external
// server), so that the suite skips its fault cases.
func (s *Server) FaultHooks() *conformance.Faults {
	if !s.Faults() {
		return nil
	}
	return s.faults.Faults()
}

// Pause freezes every process of the container
// ([containerfaults.Container.Pause]): the port still accepts TCP
// connections, but nothing is answered.
func (s *Server) Pause(ctx context.Context) error { return s.named(s.faults.Pause(ctx)) }

// Resume thaws a container frozen by [Server.Pause]. Connections opened
// meanwhile, and the requests on them, go on where they stopped.
func (s *Server) Resume(ctx context.Context) error { return s.named(s.faults.Resume(ctx)) }

// Stop stops the container: the server process exits, its connections are
// closed and its port refuses new ones. Servers run without persistence, so
// their data is gone too. [Server.Start] brings it back on the same address.
func (s *Server) Stop(ctx context.Context) error { return s.named(s.faults.Stop(ctx)) }

// Start starts a container stopped by [Server.Stop] again, with the same
// address, and waits until Spec.Ready succeeds.
func (s *Server) Start(ctx context.Context) error { return s.named(s.faults.Start(ctx)) }

// Restart is [Server.Stop], then [Server.Start].
func (s *Server) Restart(ctx context.Context) error { return s.named(s.faults.Restart(ctx)) }

// waitReady calls Spec.Ready until it succeeds or the ready timeout passes,
// and then returns Ready's last error.
func (s *Server) waitReady(ctx context.Context) error { return s.named(s.faults.WaitReady(ctx)) }

// named says which server an error of the fault hooks is about.
func (s *Server) named(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("testserver: %s at %s: %w", s.spec.Name, s.addr, err)
}

// stopTimeout is how long Terminate lets the server shut down on SIGTERM
// before Docker kills it.
const stopTimeout = 10 * time.Second

// Terminate stops and removes the container. s must not be used afterwards.
// A nil *Server is a no-op, so callers need not check for external servers.
func (s *Server) Terminate(ctx context.Context) error {
	if s == nil || s.ctr == nil {
		return nil
	}
	// Closing the hooks thaws a paused container, which some engines
	// cannot stop.
	_ = s.faults.Close(ctx)
	if err := s.ctr.Terminate(ctx, testcontainers.StopTimeout(stopTimeout)); err != nil {
		return fmt.Errorf("testserver: terminate %s: %w", s.spec.Name, err)
	}
	return nil
}

// logTail returns the end of the container's log, to explain a failed start.
func (s *Server) logTail(ctx context.Context) string {
	rc, err := s.ctr.Logs(ctx)
	if err != nil {
		return ""
	}
	defer rc.Close()
	b, _ := io.ReadAll(io.LimitReader(rc, 1<<20))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	if len(lines) == 1 && lines[0] == "" {
		return ""
	}
	return "\ncontainer log (tail):\n\t" + strings.Join(lines, "\n\t")
}

// Target is the server a test package talks to: either a container started
// here (Server != nil, fault hooks available) or an external server named by
// an environment variable such as DLOCK_TEST_REDIS_URL (Server == nil).
type Target struct {
	// URL is how clients reach the server, e.g. "redis://127.0.0.1:PORT/0".
	URL string
	// Server is the container, or nil for an external server.
	Server *Server

	// missing, when set by Main, says why there is no server: tests skip.
	missing string
}

// target is the Target of an XTarget function: the external server that the
// environment variable env names, when it is set, else a new container that
// start starts, whose URL url makes from its address.
func target(ctx context.Context, env string, start func(context.Context) (*Server, error), url func(addr string) string) (Target, error) {
	if u := os.Getenv(env); u != "" {
		return Target{URL: u}, nil
	}
	srv, err := start(ctx)
	if err != nil {
		return Target{}, err
	}
	return Target{URL: url(srv.Addr()), Server: srv}, nil
}

// Faults reports whether t.Server can be paused, stopped and restarted.
func (t Target) Faults() bool { return t.Server.Faults() }

// FaultHooks returns the fault hooks of t.Server for a conformance Harness,
// or nil for an external server ([Server.FaultHooks]).
func (t Target) FaultHooks() *conformance.Faults { return t.Server.FaultHooks() }

// Close terminates the container, if any; an external server is left alone.
func (t Target) Close(ctx context.Context) error { return t.Server.Terminate(ctx) }

// Need skips tb when [Main] found no Docker engine and containers are not
// required, and fails it when t was never set up (TestMain did not call Main).
func (t Target) Need(tb testing.TB) {
	tb.Helper()
	switch {
	case t.URL != "":
	case t.missing != "":
		tb.Skip(t.missing)
	default:
		tb.Fatal("testserver: Target not set up; call testserver.Main from TestMain")
	}
}

// NeedFaults is [Target.Need], and also skips tb when the server is external
// and so cannot be paused or stopped.
func (t Target) NeedFaults(tb testing.TB) {
	tb.Helper()
	t.Need(tb)
	if !t.Faults() {
		tb.Skip("testserver: external server " + t.URL + ": no fault hooks")
	}
}

// StartTimeout bounds how long [Main] waits for its start function.
const StartTimeout = 3 * time.Minute

// Main is a whole TestMain: it calls start, stores the result in *dst, runs
// the tests, terminates the container and exits with the tests' status.
//
// If start fails with [ErrNoDocker] and [Require] is false, the tests still
// run and those calling [Target.Need] skip; any other error, or ErrNoDocker
// when Require is true, fails the package without running its tests.
// SIGINT and SIGTERM terminate the container before the process exits.
func Main(m *testing.M, start func(context.Context) (Target, error), dst *Target) {
	os.Exit(runMain(m, start, dst))
}

func runMain(m *testing.M, start func(context.Context) (Target, error), dst *Target) int {
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	t, err := start(ctx)
	cancel()
	switch {
	case err == nil:
		*dst = t
	case errors.Is(err, ErrNoDocker) && !Require():
		dst.missing = fmt.Sprintf("%v (set %s=1 to fail instead of skipping)", err, EnvRequire)
		fmt.Fprintln(os.Stderr, dst.missing)
		return m.Run()
	default:
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}

	// go test stops a package's binary with SIGINT on ^C; without Ryuk,
	// nothing else would remove the container.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-sigs:
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_ = t.Close(ctx)
			cancel()
			fmt.Fprintf(os.Stderr, "testserver: %v: container removed\n", sig)
			os.Exit(1)
		case <-done:
		}
	}()

	code := m.Run()

	close(done)
	signal.Stop(sigs)
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := t.Close(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// removeOrphanNetworks removes the networks that test processes of this
// host made for clusters (named name, or any when name is empty) and that
// outlived them: their containers are gone by then (removeOrphans runs
// first), and Docker's address pools run out after a few dozen networks.
func removeOrphanNetworks(ctx context.Context, cli *testcontainers.DockerClient, name string) {
	host, _ := os.Hostname()
	filters := make(client.Filters).Add("label", labelOwnerHost+"="+host)
	if name != "" {
		filters = filters.Add("label", labelName+"="+name)
	}
	list, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: filters})
	if err != nil {
		return
	}
	for _, n := range list.Items {
		if !orphaned(n.Labels) {
			continue
		}
		_, _ = cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{})
	}
}
