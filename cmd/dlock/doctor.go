package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/doctor"
)

// doctorChecksTimeout bounds the checks once connected: a handful of
// requests, so a server that stops answering midway ends the run with 69.
const doctorChecksTimeout = 30 * time.Second

func newDoctorCmd() *cobra.Command {
	var (
		f      backendFlags
		ttl    time.Duration
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "doctor [--url URL | --backend NAME] [--ttl TTL] [--json]",
		Short: "Check a backend deployment for hazards that break locks",
		Long: `Doctor examines a live backend for the settings and states that break
locks: a Redis that may evict lock keys or forget them on restart, replicas
that a failover can lose grants to, a memcached that evicts, a PostgreSQL
behind a transaction-mode pooler, a ZooKeeper that shortens the session
timeout, an etcd without a leader, and more (see the README). It prints one
line per hazard: what it found, why that breaks locks, and how to fix it.
It takes no lock and leaves nothing behind.

--ttl (default: the configuration's ttl, else dlock's 15s) is the lock TTL
the deployment uses, which some server settings must exceed.

Exit status 0 when no hazard was found; 78 when one was; 69 when the backend
cannot be reached (within --connect-timeout, then 30s for the checks); 64
for bad flags or a backend doctor has no checks for.`,
		Example: `  dlock doctor --url redis://redis:6379/0
  dlock doctor --backend zk --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := f.resolve()
			if err != nil {
				return err
			}
			if f.connectTimeout <= 0 {
				return exitWith(exitUsage, "--connect-timeout %v: want a positive duration", f.connectTimeout)
			}
			if !cmd.Flags().Changed("ttl") {
				ttl = b.TTL
			} else if err := dlock.ValidateTTL(ttl); err != nil {
				return exitWith(exitUsage, "--ttl: %w", err)
			}
			ctx := cmd.Context()
			runCtx, cancel := context.WithTimeout(ctx, f.connectTimeout+doctorChecksTimeout)
			defer cancel()
			report, err := doctor.Run(runCtx, b.URL, doctor.Options{TTL: ttl, ConnectTimeout: f.connectTimeout})
			switch {
			case errors.Is(err, doctor.ErrNoChecks):
				return exitWith(exitUsage, "%w", err)
			case err != nil:
				within := fmt.Sprintf("--connect-timeout %v, then %v for the checks", f.connectTimeout, doctorChecksTimeout)
				return connectError(ctx, runCtx, b, within, err)
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(report); err != nil {
					return exitWith(exitSoftware, "%w", err)
				}
			} else {
				printReport(cmd.OutOrStdout(), backendName(b), report)
			}
			if !report.Clean() {
				return &exitError{code: exitHazard, err: errors.New("")}
			}
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().DurationVar(&ttl, "ttl", dlock.DefaultTTL, "the lock TTL the deployment uses (default: the configuration's, else 15s)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// printReport prints one line per hazard (what, why, fix), then the
// checks that could not run, then what was checked.
func printReport(out io.Writer, backend string, r *doctor.Report) {
	for _, f := range r.Findings {
		fmt.Fprintf(out, "HAZARD %s: %s. Why: %s. Fix: %s.\n", f.Check, f.Hazard, f.Why, f.Fix)
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(out, "SKIPPED %s: %s\n", s.Check, s.Reason)
	}
	for _, fact := range r.Facts {
		fmt.Fprintf(out, "%s: %s\n", fact.Name, fact.Value)
	}
	verdict := "no hazard found"
	if n := len(r.Findings); n > 0 {
		verdict = fmt.Sprintf("%d hazard(s) found", n)
	}
	fmt.Fprintf(out, "%s: %s (checked: %s)\n", backend, verdict, strings.Join(r.Checks, ", "))
}
