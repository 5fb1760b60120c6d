package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlock-go/dlock"
)

func newElectCmd() *cobra.Command {
	var (
		f     backendFlags
		key   string
		value string
		ttl   time.Duration
		wait  time.Duration
		grace time.Duration
	)
	cmd := &cobra.Command{
		Use:   "elect --key KEY [--url URL | --backend NAME] [--value V] [flags] -- COMMAND [ARGS...]",
		Short: "Run a command only while leading an election",
		Long: `Elect campaigns in the leader election KEY, among every dlock elect (and
every program using the library's Election) on that key across hosts. Once
it leads, it runs COMMAND; when COMMAND exits it resigns, so that another
candidate leads, and exits with COMMAND's status. At most one candidate of
KEY leads at a time.

--value tells the other candidates and observers who leads (dlock inspect
--key KEY prints it, on backends that store it): by default this host's
name and dlock's process id, "host:pid".

COMMAND gets DLOCK_KEY, DLOCK_TOKEN (the term: the leadership's fencing
token, greater than every earlier term of KEY: pass it to what the leader
writes to) and DLOCK_BACKEND in its environment, runs in its own process
group, and gets the signals sent to dlock (INT, TERM, HUP, QUIT, USR1,
USR2), as with dlock run.

The leadership is renewed while COMMAND runs. If it is lost anyway (the
backend lost it, or renewal failed until the lease ran out), COMMAND's
process group gets SIGTERM, then SIGKILL after --grace, and dlock exits
with status 76: run it again (under a supervisor) to campaign again.

Exit statuses are those of dlock run: 76 is "leadership lost", 75 "did not
lead within --wait".

` + exitStatuses,
		Example: `  # One scheduler across all hosts; the others wait to take over:
  dlock elect --key scheduler --url etcd://etcd:2379 -- ./scheduler

  # Under systemd (Restart=always), so that a leader that lost its
  # leadership campaigns again:
  dlock elect --key scheduler --value "$(hostname):8080" --ttl 10s -- ./scheduler`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := f.resolve()
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("value") {
				value = defaultValue()
			}
			var opts []dlock.Option
			if cmd.Flags().Changed("ttl") {
				opts = append(opts, dlock.WithTTL(ttl))
			}
			if !cmd.Flags().Changed("wait") {
				wait = b.Wait
			}
			// --wait bounds connecting and campaigning together, as for run.
			campaignCtx := cmd.Context()
			if wait > 0 {
				var cancel context.CancelFunc
				campaignCtx, cancel = context.WithTimeout(campaignCtx, wait)
				defer cancel()
			}
			client, err := f.open(campaignCtx, b, wait, opts...)
			if err != nil {
				return err
			}
			defer closeQuietly(client)
			e, err := client.Election(key)
			if err != nil {
				return exitWith(exitUsage, "%w", err)
			}
			h := holdable{
				wait: func(ctx context.Context) (dlock.Lease, error) { return e.Campaign(ctx, value) },
				what: fmt.Sprintf("leadership of %q", key),
			}
			lease, err := acquire(cmd.Context(), campaignCtx, h, wait, false)
			if errors.Is(err, dlock.ErrInvalidValue) {
				return exitWith(exitUsage, "--value %q: %w", value, errors.Unwrap(err))
			}
			if err != nil {
				return err
			}
			return runHolding(cmd, lease, fmt.Sprintf("leadership of %q", key), scheme(b.URL), args, grace)
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&key, "key", "", "the election's name (required)")
	cmd.Flags().StringVar(&value, "value", "", "who leads, as others see it: 1 to "+strconv.Itoa(dlock.MaxValueLen)+" bytes of printable UTF-8 (default host:pid)")
	cmd.Flags().DurationVar(&ttl, "ttl", 0, "leadership lease length, renewed every third of it; a leader that vanishes is replaced within about this long (default from the configuration, else 15s)")
	cmd.Flags().DurationVar(&wait, "wait", 0, "give up after campaigning this long without leading, connecting included, with status 75 (69 if still connecting) (default from the configuration, else forever)")
	cmd.Flags().DurationVar(&grace, "grace", 10*time.Second, "after a lost leadership, how long COMMAND has between SIGTERM and SIGKILL")
	_ = cmd.MarkFlagRequired("key")
	return cmd
}

// defaultValue is --value's default: this host and process, which tells an
// operator where the leader runs.
func defaultValue() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}
