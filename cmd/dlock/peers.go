package main

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/dlock-go/dlock/internal/testserver"
)

// peersModule is the checkout's directory of the peers comparison: a Go
// module of its own, so that the other libraries it measures (redsync,
// redislock, etcd's concurrency package...) never enter dlock's
// dependencies, which is why dlock bench runs it with `go run` from a
// checkout instead of linking it in.
const peersModule = "bench/peers"

// runPeers runs the peers comparison of the checkout the working directory
// is in, passing it the bench flags it shares, and returns its exit status
// as an error (nil for 0).
func runPeers(ctx context.Context, stdout, stderr io.Writer, quick bool, only []string, outDir string) error {
	dir := testserver.CheckoutDir()
	if dir == "" {
		return exitWith(exitUsage, "--peers runs %s of a dlock checkout (a module of its own, kept out of dlock's dependencies): run it from one", peersModule)
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return exitWith(exitUnavailable, "--peers needs the go command: %w", err)
	}
	args := []string{"run", ".", "--out", ""}
	if outDir != "" {
		abs, err := filepath.Abs(outDir)
		if err != nil {
			return exitWith(exitUsage, "--out %s: %w", outDir, err)
		}
		args[3] = abs
	}
	if quick {
		args = append(args, "--quick")
	}
	if len(only) > 0 {
		args = append(args, "--backends", strings.Join(only, ","))
	}
	cmd := exec.CommandContext(ctx, goCmd, args...)
	cmd.Dir = filepath.Join(dir, peersModule)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	var exit *exec.ExitError
	switch err := cmd.Run(); {
	case errors.As(err, &exit):
		return exitWith(exit.ExitCode(), "the peers comparison failed (%s)", exit)
	case err != nil:
		return exitWith(exitSoftware, "running the peers comparison: %w", err)
	}
	return nil
}
