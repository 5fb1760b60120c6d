package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/config"
)

// backendFlags select a backend: a URL, or a name from a config file.
type backendFlags struct {
	url, name, configPath string
}

func (f *backendFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.url, "url", "", "backend URL, e.g. redis://localhost:6379/0 (default $DLOCK_URL)")
	cmd.Flags().StringVar(&f.name, "backend", "", "backend name in the configuration file (default $DLOCK_BACKEND, else its default)")
	cmd.Flags().StringVar(&f.configPath, "config", "", "configuration file (default $DLOCK_CONFIG)")
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

// open connects to the backend.
func open(ctx context.Context, b config.Backend, opts ...dlock.Option) (*dlock.Client, error) {
	c, err := b.Open(ctx, opts...)
	switch {
	case err == nil:
		return c, nil
	case errors.Is(err, dlock.ErrInvalidURL), errors.Is(err, dlock.ErrInvalidTTL), errors.Is(err, dlock.ErrInvalidOption):
		return nil, exitWith(exitUsage, "%w", err)
	}
	return nil, exitWith(exitUnavailable, "backend %s: %w", backendName(b), err)
}

func backendName(b config.Backend) string {
	if b.Name != "" && b.Name != "env" {
		return fmt.Sprintf("%q", b.Name)
	}
	return scheme(b.URL)
}
