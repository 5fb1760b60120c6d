// Command dlock runs a command under a distributed lock or while leading an
// election, compares lock backends, inspects locks, and checks a backend's
// deployment for hazards, on every backend dlock supports.
//
//	dlock run --key nightly-report --url redis://localhost:6379/0 -- ./report.sh
//	dlock elect --key scheduler --url etcd://localhost:2379 -- ./scheduler
//	dlock bench --out bench-out
//	dlock inspect --key nightly-report --url redis://localhost:6379/0
//	dlock doctor --url redis://localhost:6379/0
//
// Exit statuses are documented in `dlock --help` and the README.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	// Every backend, for URLs and configuration.
	_ "github.com/dlock-go/dlock/drivers/etcd"
	_ "github.com/dlock-go/dlock/drivers/hazelcast"
	_ "github.com/dlock-go/dlock/drivers/memcache"
	_ "github.com/dlock-go/dlock/drivers/memory"
	_ "github.com/dlock-go/dlock/drivers/postgres"
	_ "github.com/dlock-go/dlock/drivers/redis"
	_ "github.com/dlock-go/dlock/drivers/zookeeper"
)

// Exit statuses, besides the child's own for `dlock run`.
const (
	exitOK          = 0
	exitUsage       = 64 // bad flags, arguments or configuration
	exitUnavailable = 69 // the backend could not be reached or refused the request
	exitSoftware    = 70 // anything else that went wrong
	exitBusy        = 75 // the lock is held (--no-wait, or --wait ran out), or elect did not lead within --wait
	exitLost        = 76 // the lock or leadership was lost while the command ran; it was terminated
	exitHazard      = 78 // doctor: the deployment has a hazard that breaks locks
	exitCannotRun   = 126
	exitNotFound    = 127
)

const exitStatuses = `Exit statuses:
  0     success (for run and elect: the command exited 0)
  1-125 run, elect: the command's own exit status
  64    usage error: bad flags, arguments or configuration
  69    the backend could not be reached (within --connect-timeout, and
        for run and elect within --wait), or refused the request
  70    internal error
  75    run: the lock is busy (--no-wait, or --wait ran out); elect: it
        did not lead within --wait
  76    run: the lock was lost while the command ran; elect: the
        leadership was lost while the command ran; it was sent SIGTERM,
        then SIGKILL after --grace
  78    doctor: a hazard was found in the backend's deployment
  126   run, elect: the command could not be started
  127   run, elect: the command was not found
  128+N run, elect: the command was killed by signal N`

// exitError carries an exit status out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func exitWith(code int, format string, args ...any) error {
	return &exitError{code: code, err: fmt.Errorf(format, args...)}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line args and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// -v sets slog's default logger for the command's run (setLogger).
	defer slog.SetDefault(slog.Default())
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil && ee.err.Error() != "" {
			fmt.Fprintln(stderr, "dlock:", message(ee.err))
		}
		return ee.code
	}
	// Anything cobra itself rejected: unknown flags, missing arguments.
	fmt.Fprintln(stderr, "dlock:", message(err))
	fmt.Fprintln(stderr, "Run 'dlock --help' for usage.")
	return exitUsage
}

// message returns err's text for a line that already starts with "dlock: ".
// The library's errors name their package, as Go errors do ("dlock:
// invalid key: empty"), once or more along a chain: the line says it once.
func message(err error) string {
	return strings.ReplaceAll(strings.TrimPrefix(err.Error(), "dlock: "), ": dlock: ", ": ")
}

// setLogger makes slog's default logger write to stderr: the client
// libraries' own lines, which go to slog at Debug (see internal/liblog),
// only when verbose.
func setLogger(stderr io.Writer, verbose bool) {
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})))
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "dlock",
		Short: "Run commands under distributed locks, compare lock backends, inspect locks",
		Long: `dlock is the command of the dlock library: one distributed-lock API over
Redis, memcached, ZooKeeper, etcd, PostgreSQL advisory locks, Hazelcast and
an in-process backend.

A backend is named by URL (--url, or DLOCK_URL), or by name from a
configuration file (--backend with --config, or DLOCK_CONFIG); see
'dlock help run'.

` + exitStatuses,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	var verbose bool
	root.PersistentFlags().BoolVarP(&verbose, "verbose", "v", false, "show the backend client libraries' own log lines (connections, retries)")
	root.PersistentPreRun = func(*cobra.Command, []string) { setLogger(stderr, verbose) }
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newRunCmd(), newElectCmd(), newBenchCmd(), newInspectCmd(), newDoctorCmd())
	return root
}
