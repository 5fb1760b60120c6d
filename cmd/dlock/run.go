package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlock-go/dlock"
)

// forwarded are the signals dlock run passes on to the command.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

func newRunCmd() *cobra.Command {
	var (
		f       backendFlags
		key     string
		ttl     time.Duration
		wait    time.Duration
		noWait  bool
		grace   time.Duration
		permits int
	)
	cmd := &cobra.Command{
		Use:   "run --key KEY [--url URL | --backend NAME] [flags] -- COMMAND [ARGS...]",
		Short: "Run a command while holding a lock (or one of N permits)",
		Long: `Run takes the lock KEY, runs COMMAND while holding it, and releases it when
COMMAND exits, exiting with COMMAND's status: like flock(1), across hosts.

With --permits N, KEY is a semaphore instead: at most N copies run at once
across hosts (every run of KEY must give the same N), each holding a permit
that is its own lock, named KEY/permit/I, which DLOCK_KEY then names (its
fencing token rises per permit). Waiters get permits in the order they came,
on backends whose locks queue their waiters.

COMMAND gets DLOCK_KEY, DLOCK_TOKEN (the fencing token: pass it to what the
lock protects) and DLOCK_BACKEND (the backend's URL scheme) in its
environment. It runs in its own process group. Signals sent to dlock (INT,
TERM, HUP, QUIT, USR1, USR2) are forwarded to it.

The lock is renewed while COMMAND runs. If it is lost anyway (the backend
lost it, or renewal failed until the lease ran out), COMMAND's process group
gets SIGTERM, then SIGKILL after --grace, and dlock exits with status 76.

` + exitStatuses,
		Example: `  # A cron job that must not run twice at once, across all hosts:
  dlock run --key nightly-report --url redis://redis:6379/0 -- ./report.sh --full

  # Give up at once if another host is running it (exit status 75):
  dlock run --key nightly-report --no-wait -- ./report.sh

  # Wait at most 5 minutes, with a backend from the configuration file:
  dlock run --config /etc/dlock.yaml --backend zk --key deploy --wait 5m -- make deploy

  # At most 4 copies at once, across all hosts:
  dlock run --key api-crawler --permits 4 --url redis://redis:6379/0 -- ./crawl.sh`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := f.resolve()
			if err != nil {
				return err
			}
			var opts []dlock.Option
			if cmd.Flags().Changed("ttl") {
				opts = append(opts, dlock.WithTTL(ttl))
			}
			if !cmd.Flags().Changed("wait") {
				wait = b.Wait
			}
			// --wait bounds connecting and waiting together: a cron job
			// given 5 s is done in about 5 s, backend down or lock held.
			lockCtx := cmd.Context()
			if wait > 0 && !noWait {
				var cancel context.CancelFunc
				lockCtx, cancel = context.WithTimeout(lockCtx, wait)
				defer cancel()
			}
			client, err := f.open(lockCtx, b, wait, opts...)
			if err != nil {
				return err
			}
			defer closeQuietly(client)
			h, err := newHoldable(client, key, permits, cmd.Flags().Changed("permits"))
			if err != nil {
				return exitWith(exitUsage, "%w", err)
			}
			lease, err := acquire(cmd.Context(), lockCtx, h, wait, noWait)
			if err != nil {
				return err
			}
			return runHolding(cmd, lease, fmt.Sprintf("lock %q", lease.Key()), scheme(b.URL), args, grace)
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&key, "key", "", "the lock's name (required)")
	cmd.Flags().DurationVar(&ttl, "ttl", 0, "lease length, renewed every third of it (default from the configuration, else 15s)")
	cmd.Flags().DurationVar(&wait, "wait", 0, "give up after waiting this long for the lock, connecting included, with status 75 (69 if still connecting) (default from the configuration, else forever)")
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "give up at once if the lock is held, with status 75")
	cmd.Flags().DurationVar(&grace, "grace", 10*time.Second, "after a lost lock, how long COMMAND has between SIGTERM and SIGKILL")
	cmd.Flags().IntVar(&permits, "permits", 1, fmt.Sprintf("run at most this many copies at once across hosts (1 to %d): KEY is a semaphore of that many permits", dlock.MaxPermits))
	_ = cmd.MarkFlagRequired("key")
	cmd.MarkFlagsMutuallyExclusive("wait", "no-wait")
	return cmd
}

// holdable is what run holds: a lock, or a permit of a semaphore.
type holdable struct {
	wait, try func(context.Context) (dlock.Lease, error)
	busy      string // says that it is held, for exit status 75
	what      string // names it in "KEY still held after waiting"
}

// newHoldable is the lock key, or, when permits was given, the semaphore
// key of that many permits.
func newHoldable(client *dlock.Client, key string, permits int, semaphore bool) (holdable, error) {
	if !semaphore {
		m, err := client.Mutex(key)
		if err != nil {
			return holdable{}, err
		}
		return holdable{m.Lock, m.TryLock, fmt.Sprintf("lock %q is held by someone else", key), fmt.Sprintf("lock %q", key)}, nil
	}
	s, err := client.Semaphore(key, permits)
	if err != nil {
		return holdable{}, err
	}
	return holdable{s.Acquire, s.TryAcquire, fmt.Sprintf("all %d permits of %q are held", permits, key), fmt.Sprintf("all %d permits of %q", permits, key)}, nil
}

// acquire takes the lock as the flags say: waitCtx is ctx bounded by
// --wait, whose time connecting already took from.
func acquire(ctx, waitCtx context.Context, h holdable, wait time.Duration, noWait bool) (dlock.Lease, error) {
	if noWait {
		l, err := h.try(ctx)
		if errors.Is(err, dlock.ErrLocked) {
			return nil, exitWith(exitBusy, "%s", h.busy)
		}
		return l, lockErr(ctx, err)
	}
	l, err := h.wait(waitCtx)
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return nil, exitWith(exitBusy, "%s still held after waiting %v", h.what, wait)
	}
	return l, lockErr(ctx, err)
}

func lockErr(ctx context.Context, err error) error {
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return exitWith(128+int(syscall.SIGINT), "interrupted while waiting for the lock")
	}
	return exitWith(exitUnavailable, "%w", err)
}

// runHolding runs the command under the lease, and releases it after. what
// names the lease in the message of its loss ("lock \"K\"").
func runHolding(cmd *cobra.Command, lease dlock.Lease, what, backend string, args []string, grace time.Duration) error {
	ctx := context.WithoutCancel(cmd.Context()) // signals go to the child now
	defer func() {
		unlockCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := lease.Unlock(unlockCtx); err != nil && !errors.Is(err, dlock.ErrLockLost) {
			fmt.Fprintln(cmd.ErrOrStderr(), "dlock: releasing the lock:", message(err))
		}
	}()

	child := exec.Command(args[0], args[1:]...)
	child.Stdin, child.Stdout, child.Stderr = cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()
	child.Env = append(os.Environ(),
		"DLOCK_KEY="+lease.Key(),
		"DLOCK_TOKEN="+strconv.FormatUint(lease.Token(), 10),
		"DLOCK_BACKEND="+backend,
	)
	// Its own process group, so that a lost lock stops everything it started.
	child.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}

	signals := make(chan os.Signal, 8)
	signal.Notify(signals, forwarded...)
	defer signal.Stop(signals)
	if err := child.Start(); err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return exitWith(exitNotFound, "%v", err)
		}
		return exitWith(exitCannotRun, "%v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()

	for {
		select {
		case err := <-exited:
			return childStatus(err)
		case sig := <-signals:
			_ = child.Process.Signal(sig)
		case <-lease.Done():
			fmt.Fprintf(cmd.ErrOrStderr(), "dlock: %s lost: %v; terminating the command\n", what, message(lease.Err()))
			terminate(child.Process.Pid, exited, grace)
			return exitWith(exitLost, "")
		}
	}
}

// terminate sends SIGTERM to the process group, then SIGKILL after grace
// unless the command has exited by then.
func terminate(pgid int, exited <-chan error, grace time.Duration) {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-exited:
	case <-timer.C:
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-exited
	}
}

// childStatus turns the command's end into dlock's exit status.
func childStatus(err error) error {
	if err == nil {
		return nil
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return exitWith(exitSoftware, "waiting for the command: %w", err)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitWith(128+int(ws.Signal()), "")
	}
	return exitWith(ee.ExitCode(), "")
}

func closeQuietly(c *dlock.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = c.Close(ctx)
}

// scheme returns a URL's scheme, the backend's name.
func scheme(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Scheme != "" {
		return u.Scheme
	}
	return "unknown"
}
