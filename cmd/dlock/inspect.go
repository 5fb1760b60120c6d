package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/dlock-go/dlock"
)

func newInspectCmd() *cobra.Command {
	var (
		f      backendFlags
		key    string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "inspect --key KEY [--url URL | --backend NAME]",
		Short: "Show who holds a lock, its fencing token, time left and waiters",
		Long: `Inspect describes a lock without taking it: whether it is held, by whom
(the owner identity, where the backend stores one), the value an election's
leader campaigned with (where the backend stores one), its fencing token, the
time left on the holder's lease, and how many clients wait, as far as the
backend can tell. A lock nobody holds is reported as "not held".

Exit status 0 whether or not the lock is held; 69 if the backend cannot be
reached (within --connect-timeout) or cannot inspect locks.`,
		Example: `  dlock inspect --key nightly-report --url redis://localhost:6379/0
  dlock inspect --key nightly-report --backend main --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := f.resolve()
			if err != nil {
				return err
			}
			client, err := f.open(cmd.Context(), b, 0)
			if err != nil {
				return err
			}
			defer closeQuietly(client)
			info, err := client.Inspect(cmd.Context(), key)
			switch {
			case errors.Is(err, dlock.ErrInvalidKey):
				return exitWith(exitUsage, "%w", err)
			case err != nil:
				return exitWith(exitUnavailable, "%w", err)
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(struct {
					Key string `json:"key"`
					dlock.Info
				}{key, info})
			}
			printInfo(cmd.OutOrStdout(), key, info)
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&key, "key", "", "the lock's name (required)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	_ = cmd.MarkFlagRequired("key")
	return cmd
}

func printInfo(out io.Writer, key string, info dlock.Info) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	defer w.Flush()
	fmt.Fprintf(w, "key:\t%s\n", key)
	if !info.Held {
		fmt.Fprintf(w, "state:\tnot held\n")
		if info.Token > 0 {
			fmt.Fprintf(w, "last token:\t%d\n", info.Token)
		}
	} else {
		fmt.Fprintf(w, "state:\theld (%s, %d holder(s))\n", info.Mode, info.Holders)
		if info.Owner != "" {
			fmt.Fprintf(w, "owner:\t%s\n", info.Owner)
		}
		// An election's leader: the value it campaigned with, on backends
		// that store one (its token is the term).
		if info.Value != "" {
			fmt.Fprintf(w, "value:\t%s\n", info.Value)
		}
		if info.Token > 0 {
			fmt.Fprintf(w, "token:\t%d\n", info.Token)
		} else {
			// Info.Token is zero when the backend does not know it (a
			// memcached lock before its first renewal records it).
			fmt.Fprintf(w, "token:\tunknown\n")
		}
		if info.TTL > 0 {
			fmt.Fprintf(w, "time left:\t%v\n", info.TTL)
		}
	}
	if info.Waiters >= 0 {
		fmt.Fprintf(w, "waiters:\t%d\n", info.Waiters)
	} else {
		fmt.Fprintf(w, "waiters:\tunknown to this backend\n")
	}
}
