package main

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/config"
)

// backendFlags select a backend: a URL, or a name from a config file; and
// bound the time to connect to it.
type backendFlags struct {
	url, name, configPath string
	connectTimeout        time.Duration
}

// defaultConnectTimeout is --connect-timeout's default: dlock.Open's own.
const defaultConnectTimeout = dlock.DefaultConnectTimeout

func (f *backendFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.url, "url", "", "backend URL, e.g. redis://localhost:6379/0 (default $DLOCK_URL)")
	cmd.Flags().StringVar(&f.name, "backend", "", "backend name in the configuration file (default $DLOCK_BACKEND, else its default)")
	cmd.Flags().StringVar(&f.configPath, "config", "", "configuration file (default $DLOCK_CONFIG)")
	cmd.Flags().DurationVar(&f.connectTimeout, "connect-timeout", defaultConnectTimeout, "give up connecting to the backend after this long, with status 69")
}

// resolve returns the selected backend with its defaults.
func (f *backendFlags) resolve() (config.Backend, error) {
	cfg, err := config.Load(f.configPath)
	if err != nil {
		return config.Backend{}, exitWith(exitUsage, "%w", err)
	}
	if f.url != "" {
		b := config.Backend{Name: f.name, URL: f.url, Renewal: true}
		if f.name != "" || cfg.Default != "" {
			// Keep the configured defaults of the named backend, with this URL.
			if named, err := cfg.Select(f.name); err == nil {
				named.URL = f.url
				b = named
			}
		}
		return b, nil
	}
	b, err := cfg.Select(f.name)
	if err != nil {
		return config.Backend{}, exitWith(exitUsage, "%w", err)
	}
	return b, nil
}

// open connects to the backend within --connect-timeout, and within ctx,
// which dlock run bounds by --wait (given as wait, for the message).
func (f *backendFlags) open(ctx context.Context, b config.Backend, wait time.Duration, opts ...dlock.Option) (*dlock.Client, error) {
	if f.connectTimeout <= 0 {
		return nil, exitWith(exitUsage, "--connect-timeout %v: want a positive duration", f.connectTimeout)
	}
	within := fmt.Sprintf("--connect-timeout %v", f.connectTimeout)
	if d, ok := ctx.Deadline(); ok && time.Until(d) < f.connectTimeout {
		within = fmt.Sprintf("--wait %v", wait)
	}
	connectCtx, cancel := context.WithTimeout(ctx, f.connectTimeout)
	defer cancel()
	c, err := b.Open(connectCtx, opts...)
	if err != nil {
		return nil, connectError(ctx, connectCtx, b, within, err)
	}
	return c, nil
}

// connectError is the exit of a failure to connect to backend b within
// connectCtx (derived from ctx), which is described as within says.
func connectError(ctx, connectCtx context.Context, b config.Backend, within string, err error) error {
	switch {
	case errors.Is(err, dlock.ErrInvalidURL), errors.Is(err, dlock.ErrInvalidTTL), errors.Is(err, dlock.ErrInvalidOption):
		return exitWith(exitUsage, "%w", err)
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return exitWith(128+int(syscall.SIGINT), "interrupted while connecting to backend %s", backendName(b))
	case errors.Is(err, context.DeadlineExceeded) && connectCtx.Err() != nil:
		return exitWith(exitUnavailable, "backend %s: no connection within %s: %w", backendName(b), within, err)
	}
	return exitWith(exitUnavailable, "backend %s: %w", backendName(b), err)
}

func backendName(b config.Backend) string {
	if b.Name != "" && b.Name != "env" {
		return fmt.Sprintf("%q", b.Name)
	}
	return scheme(b.URL)
}
