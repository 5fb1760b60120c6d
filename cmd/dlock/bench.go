package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	tclog "github.com/testcontainers/testcontainers-go/log"

	"github.com/dlock-go/dlock/internal/benchkit"
	"github.com/dlock-go/dlock/internal/benchtargets"
	"github.com/dlock-go/dlock/internal/testserver"
)

// containerBackend is a backend dlock bench can start in containers from
// the project's own images, as the tests do: start returns a target over the
// started servers, and a func that stops them.
type containerBackend struct {
	name  string
	start func(ctx context.Context) (benchkit.Target, func(), error)
}

var containerBackends = []containerBackend{
	{"redis", single(testserver.StartRedis, func(a string) string { return "redis://" + a + "/0" }, benchtargets.Redis)},
	{"redis-cluster", redisCluster},
	{"redlock", redLock},
	{"memcached", single(func(ctx context.Context) (*testserver.Server, error) { return testserver.StartMemcached(ctx) },
		func(a string) string { return "memcache://" + a }, benchtargets.Memcached)},
	{"postgres", single(testserver.StartPostgres, testserver.PostgresURL, postgresTarget)},
	{"etcd", single(testserver.StartEtcd, func(a string) string { return "etcd://" + a }, benchtargets.Etcd)},
	{"zookeeper", single(testserver.StartZooKeeper, func(a string) string { return "zk://" + a + "/dlock-bench?session_ttl=4s" }, zookeeperTarget)},
}

// single starts one server and makes its target from its URL.
func single(start func(context.Context) (*testserver.Server, error), url func(addr string) string,
	target func(url string) (benchkit.Target, func(), error)) func(context.Context) (benchkit.Target, func(), error) {
	return func(ctx context.Context) (benchkit.Target, func(), error) {
		srv, err := start(ctx)
		if err != nil {
			return benchkit.Target{}, nil, err
		}
		t, done, err := target(url(srv.Addr()))
		stop := func() {
			if done != nil {
				done()
			}
			_ = srv.Terminate(context.WithoutCancel(ctx))
		}
		if err != nil {
			stop()
			return benchkit.Target{}, nil, err
		}
		return t, stop, nil
	}
}

// redisCluster is a 3-master Redis Cluster.
func redisCluster(ctx context.Context) (benchkit.Target, func(), error) {
	c, err := testserver.StartRedisCluster(ctx, 3)
	if err != nil {
		return benchkit.Target{}, nil, err
	}
	return withStop(benchtargets.RedisCluster(c.URL(), c.Addrs()))(func() { _ = c.Terminate(context.WithoutCancel(ctx)) })
}

// redLock is RedLock over 5 independent masters.
func redLock(ctx context.Context) (benchkit.Target, func(), error) {
	g, err := testserver.StartRedisGroup(ctx, 5)
	if err != nil {
		return benchkit.Target{}, nil, err
	}
	return withStop(benchtargets.RedLock(g.RedLockURL(), g.Addrs()))(func() { _ = g.Terminate(context.WithoutCancel(ctx)) })
}

// withStop chains stopping the servers after a target's own cleanup.
func withStop(t benchkit.Target, done func(), err error) func(stop func()) (benchkit.Target, func(), error) {
	return func(stop func()) (benchkit.Target, func(), error) {
		if err != nil {
			stop()
			return benchkit.Target{}, nil, err
		}
		return t, func() { done(); stop() }, nil
	}
}

func postgresTarget(url string) (benchkit.Target, func(), error) {
	return benchtargets.Postgres(context.Background(), url)
}

// zookeeperTarget: the project's ZooKeeper image caps sessions at 4 s.
func zookeeperTarget(url string) (benchkit.Target, func(), error) {
	return benchtargets.ZooKeeperTarget(url, 4*time.Second)
}

// targetFor makes a target for an existing server's URL.
func targetFor(rawURL string) (benchkit.Target, func(), error) {
	switch scheme(rawURL) {
	case "redis", "rediss":
		return benchtargets.Redis(rawURL)
	case "memcache", "memcached":
		return benchtargets.Memcached(rawURL)
	case "postgres", "postgresql":
		return postgresTarget(rawURL)
	case "etcd":
		return benchtargets.Etcd(rawURL)
	case "zk":
		return benchtargets.ZooKeeperTarget(rawURL, 10*time.Second) // the driver's default session timeout
	}
	return benchtargets.Open(scheme(rawURL), rawURL), func() {}, nil
}

// results is what --out writes as results.json.
type results struct {
	Time    time.Time         `json:"time"`
	Machine string            `json:"machine"`
	Quick   bool              `json:"quick"`
	Reports []benchkit.Report `json:"reports"`
	Skipped []skipped         `json:"skipped"`
}

type skipped struct {
	Backend string `json:"backend"`
	Reason  string `json:"reason"`
}

func newBenchCmd() *cobra.Command {
	var (
		rawURL string
		only   []string
		quick  bool
		outDir string
		peers  bool
	)
	cmd := &cobra.Command{
		Use:   "bench [--url URL | --peers] [--backends a,b] [--quick] [--out DIR]",
		Short: "Compare lock backends: latency, handoff, throughput, fairness, cost",
		Long: `Bench measures lock backends the same way dlock's benchmark suite does:
uncontended acquire+release and its ratio to the raw client commands a lock
needs, handoff latency to 1 and 16 blocked waiters (in one process and in 16),
contended throughput with 8 and 64 goroutines with Jain's fairness index and
the longest wait, backend requests per critical section, a semaphore of 4
permits (alone and contended), an election's failover time (from its
leader's crash to a waiting follower leading, beside the leadership's TTL),
and the cost of holding 10,000 locks on one client.

With no flags it benchmarks the embedded in-process backend, then every
backend it can start in a container from the project's own images when a
Docker engine answers (run from a checkout, it builds missing images with
testenv/setup), and says which it skipped and why. --url benchmarks an
existing server instead. A standard run takes about 20 s per backend;
--quick takes a few. A step that fails shows as failed, its error listed
after the table, and the backend's other steps still report; bench then
exits 70.

--out DIR writes results.json and charts (SVG and PNG) comparing the
backends side by side.

--peers compares dlock, on each backend, with the lock libraries people
use there instead (redsync, redislock, etcd's concurrency.Mutex,
go-zookeeper's Lock, raw PostgreSQL advisory locks, a polled memcached
add), on the same servers in the same run: see bench/peers/README.md. It
runs from a dlock checkout (the comparison is a Go module of its own, so
that those libraries stay out of dlock's dependencies).`,
		Example: `  dlock bench
  dlock bench --quick --out bench-out
  dlock bench --url redis://localhost:6379/0
  dlock bench --peers --out peers-out`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if peers {
				if rawURL != "" {
					return exitWith(exitUsage, "--peers starts its own servers: it takes no --url")
				}
				return runPeers(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), quick, only, outDir)
			}
			sizes := benchkit.Standard
			if quick {
				sizes = benchkit.Quick
			}
			progress := func(s string) { fmt.Fprintln(cmd.ErrOrStderr(), "bench:", s) }
			tclog.SetDefault(tclog.NewNoopLogger()) // our own progress lines say what happens
			res := results{Time: time.Now().UTC(), Quick: quick, Machine: fmt.Sprintf("%s/%s, %d CPUs, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())}
			wanted := func(name string) bool { return len(only) == 0 || slices.Contains(only, name) }

			// measure keeps a backend's report whatever failed in it:
			// a failed step shows as failed beside the others' figures
			// (Suite has told progress of each failure).
			measure := func(t benchkit.Target) {
				r, _ := benchkit.Suite(ctx, t, sizes, progress)
				res.Reports = append(res.Reports, r)
			}
			if rawURL != "" {
				t, done, err := targetFor(rawURL)
				if err != nil {
					return exitWith(exitUsage, "%w", err)
				}
				defer done()
				measure(t)
			} else {
				if wanted("memory") {
					measure(benchtargets.Memory())
				}
				for _, cb := range containerBackends {
					if !wanted(cb.name) {
						continue
					}
					if reason := benchContainer(ctx, cb, measure, progress); reason != "" {
						res.Skipped = append(res.Skipped, skipped{cb.name, reason})
						progress("skipped " + cb.name + ": " + reason)
					}
				}
			}
			if ctx.Err() != nil {
				return exitWith(130, "interrupted")
			}
			printTable(cmd.OutOrStdout(), res)
			if outDir != "" {
				if err := writeOut(outDir, res); err != nil {
					return exitWith(exitSoftware, "writing %s: %w", outDir, err)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "bench: wrote %s\n", outDir)
			}
			if len(res.Reports) == 0 {
				return exitWith(exitUnavailable, "no backend could be measured")
			}
			if n := failedSteps(res.Reports); n > 0 {
				return exitWith(exitSoftware, "%d step(s) failed (listed after the table)", n)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&rawURL, "url", "", "benchmark the existing server at URL instead of starting containers")
	cmd.Flags().StringSliceVar(&only, "backends", nil, "only these backends (memory, "+strings.Join(containerNames(), ", ")+")")
	cmd.Flags().BoolVar(&quick, "quick", false, "small sizes: a smoke run of a few seconds per backend")
	cmd.Flags().StringVar(&outDir, "out", "", "write results.json and charts to this directory")
	cmd.Flags().BoolVar(&peers, "peers", false, "compare dlock with other lock libraries on each backend, in one run (from a dlock checkout: runs "+peersModule+")")
	return cmd
}

func containerNames() []string {
	var names []string
	for _, cb := range containerBackends {
		names = append(names, cb.name)
	}
	return names
}

// benchContainer starts cb's servers, measures them and stops them; it
// returns why it could not, or "".
func benchContainer(ctx context.Context, cb containerBackend, measure func(benchkit.Target), progress func(string)) string {
	progress("starting " + cb.name + " in containers")
	t, stop, err := cb.start(ctx)
	if errors.Is(err, testserver.ErrNoImage) {
		if dir := testserver.CheckoutDir(); dir != "" {
			progress("building the project's images with " + filepath.Join(dir, "testenv", "setup"))
			if berr := testserver.BuildImages(ctx); berr != nil {
				return berr.Error()
			}
			t, stop, err = cb.start(ctx)
		}
	}
	switch {
	case errors.Is(err, testserver.ErrNoDocker):
		return "no Docker engine answers (start one, or use --url)"
	case errors.Is(err, testserver.ErrNoImage):
		return "its image is not built: run `make setup` in a dlock checkout"
	case err != nil:
		return err.Error()
	}
	defer stop()
	measure(t)
	return ""
}

// writeOut writes results.json and the charts.
func writeOut(dir string, res results) error {
	if err := benchkit.WriteResults(dir, res); err != nil {
		return err
	}
	return writeCharts(dir, res.Reports)
}
