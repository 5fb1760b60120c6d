// Command peers compares dlock with the lock libraries people use on each
// of its backends instead, on the same servers in the same run: redsync and
// bsm/redislock on Redis, etcd's concurrency.Mutex, go-zookeeper's Lock,
// raw PostgreSQL advisory locks, and a polled memcached add. It is a
// module of its own so that those libraries never enter dlock's
// dependencies; `make bench-peers` and `dlock bench --peers` run it.
//
// It starts each backend's server in a container from the project's own
// images (as the tests do; it builds them with testenv/setup when they are
// missing), measures every contender with the measurements of dlock bench
// (internal/benchkit), prints a table and, with --out, writes results.json
// and charts. README.md beside this file says what each figure means.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	tclog "github.com/testcontainers/testcontainers-go/log"

	"github.com/dlock-go/dlock/internal/benchkit"
	"github.com/dlock-go/dlock/internal/testserver"

	_ "github.com/dlock-go/dlock/drivers/etcd"
	_ "github.com/dlock-go/dlock/drivers/memcache"
	_ "github.com/dlock-go/dlock/drivers/postgres"
	_ "github.com/dlock-go/dlock/drivers/redis"
	_ "github.com/dlock-go/dlock/drivers/zookeeper"
)

// backends are measured in this order.
var backends = []backend{redisBackend, redlockBackend, etcdBackend, zookeeperBackend, postgresBackend, memcachedBackend}

// results is what --out writes as results.json.
type results struct {
	Time    time.Time `json:"time"`
	Machine string    `json:"machine"`
	Quick   bool      `json:"quick"`
	Rows    []row     `json:"rows"`
	Skipped []skipped `json:"skipped,omitempty"`
}

type skipped struct {
	Backend string `json:"backend"`
	Reason  string `json:"reason"`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run runs the comparison as args ask and returns the exit status: 0, 64
// for bad flags, 69 when no backend could be measured, 70 when the output
// could not be written.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quickRun := fs.Bool("quick", false, "small sizes: a smoke run, figures only roughly meaningful")
	only := fs.String("backends", "", "only these backends, comma-separated ("+strings.Join(backendNames(), ", ")+")")
	outDir := fs.String("out", "", "write results.json and charts (SVG and PNG) into this directory")
	markdown := fs.Bool("markdown", false, "print the table as Markdown, as the README shows it")
	contenders := fs.Int("contenders", 0, "independent clients in the contended run (default 64, 8 with --quick)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run (servers excluded) to this file, for go tool pprof")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		return 64
	}
	var wanted []backend
	for _, b := range backends {
		if *only == "" || slices.Contains(strings.Split(*only, ","), b.name) {
			wanted = append(wanted, b)
		}
	}
	if len(wanted) == 0 {
		fmt.Fprintf(stderr, "peers: no backend named in --backends %q (have %s)\n", *only, strings.Join(backendNames(), ", "))
		return 64
	}
	s := standard
	if *quickRun {
		s = quick
	}
	if *contenders < 0 {
		fmt.Fprintf(stderr, "peers: --contenders %d: must be positive\n", *contenders)
		return 64
	} else if *contenders > 0 {
		s.contenders = *contenders
	}
	progress := func(msg string) { fmt.Fprintln(stderr, "peers:", msg) }
	if *cpuProfile != "" {
		// Peers and dlock run in this one process: a profile shows where
		// each spends its client CPU (focus on a package to compare).
		stopProfile, err := startCPUProfile(*cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "peers: --cpuprofile: %v\n", err)
			return 70
		}
		defer stopProfile()
	}
	tclog.SetDefault(tclog.NewNoopLogger()) // the progress lines say what happens
	res := results{Time: time.Now().UTC(), Quick: *quickRun, Machine: fmt.Sprintf("%s/%s, %d CPUs, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())}
	for _, b := range wanted {
		rows, err := runBackend(ctx, b, s, progress)
		if ctx.Err() != nil {
			fmt.Fprintln(stderr, "peers: interrupted")
			return 130
		}
		if err != nil {
			res.Skipped = append(res.Skipped, skipped{b.name, err.Error()})
			progress("skipped " + b.name + ": " + err.Error())
			continue
		}
		res.Rows = append(res.Rows, rows...)
	}
	if *markdown {
		printMarkdown(stdout, res)
	} else {
		printTable(stdout, res)
	}
	if *outDir != "" {
		if err := writeOut(*outDir, res); err != nil {
			fmt.Fprintf(stderr, "peers: writing %s: %v\n", *outDir, err)
			return 70
		}
		progress("wrote " + *outDir)
	}
	if len(res.Rows) == 0 {
		return 69
	}
	return 0
}

// runBackend starts b's servers (building the images first when they are
// missing), measures its contenders and stops the servers.
func runBackend(ctx context.Context, b backend, s sizes, progress func(string)) ([]row, error) {
	progress("starting " + b.name + " in containers")
	e, err := b.start(ctx)
	if errors.Is(err, testserver.ErrNoImage) && testserver.CheckoutDir() != "" {
		progress("building the project's images with testenv/setup")
		if err := testserver.BuildImages(ctx); err != nil {
			return nil, err
		}
		e, err = b.start(ctx)
	}
	if errors.Is(err, testserver.ErrNoDocker) {
		return nil, errors.New("no Docker engine answers (run `make setup` in the checkout)")
	}
	if err != nil {
		return nil, err
	}
	defer e.stop()
	return measure(ctx, b.name, e, s, progress)
}

func backendNames() []string {
	var names []string
	for _, b := range backends {
		names = append(names, b.name)
	}
	return names
}

// writeOut writes results.json and the charts into dir.
func writeOut(dir string, res results) error {
	if err := benchkit.WriteResults(dir, res); err != nil {
		return err
	}
	return writeCharts(dir, res.Rows)
}

// startCPUProfile starts writing a CPU profile to path and returns what
// stops it and closes the file.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
