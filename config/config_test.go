package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/config"
	_ "github.com/dlock-go/dlock/drivers/memory"
)

func write(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "dlock.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// clearEnv makes each test see only the variables it sets.
func clearEnv(t *testing.T) {
	for _, v := range []string{"DLOCK_CONFIG", "DLOCK_BACKEND", "DLOCK_URL", "DLOCK_TTL", "DLOCK_WAIT", "DLOCK_RENEWAL"} {
		t.Setenv(v, "")
	}
}

func TestLoadAndSelect(t *testing.T) {
	clearEnv(t)
	path := write(t, `
default: main
backends:
  main:
    url: mem://main
    ttl: 30s
    wait: 5m
  other:
    url: mem://other
    renewal: false
`)
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Select("")
	if err != nil {
		t.Fatal(err)
	}
	if b.Name != "main" || b.URL != "mem://main" || b.TTL != 30*time.Second || b.Wait != 5*time.Minute || !b.Renewal {
		t.Errorf("default backend: got %+v", b)
	}
	o, err := c.Select("other")
	if err != nil || o.Renewal {
		t.Errorf("other: got %+v, %v; want renewal off", o, err)
	}
	client, err := b.Open(t.Context())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	client.Close(t.Context())
}

func TestEnvironmentOverrides(t *testing.T) {
	clearEnv(t)
	path := write(t, "default: main\nbackends:\n  main:\n    url: mem://main\n  other:\n    url: mem://other\n")
	t.Setenv("DLOCK_CONFIG", path)
	t.Setenv("DLOCK_BACKEND", "other")
	t.Setenv("DLOCK_URL", "mem://overridden")
	t.Setenv("DLOCK_TTL", "2s")
	c, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Select("")
	if err != nil {
		t.Fatal(err)
	}
	if b.Name != "other" || b.URL != "mem://overridden" || b.TTL != 2*time.Second {
		t.Errorf("got %+v, want backend other with the URL and TTL of the environment", b)
	}
}

func TestURLWithoutFile(t *testing.T) {
	clearEnv(t)
	t.Setenv("DLOCK_URL", "mem://x")
	c, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := c.Select(""); err != nil || b.URL != "mem://x" {
		t.Errorf("got %+v, %v", b, err)
	}
}

// Bad configuration gets an error naming the file, the field and the problem.
func TestBadConfig(t *testing.T) {
	for name, tc := range map[string]struct{ yaml, want string }{
		"bad ttl":         {"backends:\n  main:\n    url: mem://m\n    ttl: soon\n", `:4: backends.main.ttl: want a duration such as 30s, got "soon"`},
		"ttl too short":   {"backends:\n  main:\n    url: mem://m\n    ttl: 1ms\n", "backends.main.ttl: dlock: invalid TTL"},
		"missing url":     {"backends:\n  main:\n    ttl: 1s\n", "backends.main.url: missing"},
		"url sans scheme": {"backends:\n  main:\n    url: localhost:6379\n", "backends.main.url: not a URL with a scheme"},
		"unknown field":   {"backends:\n  main:\n    url: mem://m\n    tll: 1s\n", "field tll not found"},
		"unknown default": {"default: nope\nbackends:\n  main:\n    url: mem://m\n", `default: names backend "nope"`},
		"not yaml":        {"backends: [unclosed\n", "not valid YAML"},
	} {
		t.Run(name, func(t *testing.T) {
			clearEnv(t)
			path := write(t, tc.yaml)
			_, err := config.Load(path)
			if !errors.Is(err, config.ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name the file and say %q", err, tc.want)
			}
		})
	}
}

func TestBadEnvironment(t *testing.T) {
	for v, value := range map[string]string{"DLOCK_TTL": "forever", "DLOCK_RENEWAL": "maybe", "DLOCK_URL": "no-scheme"} {
		t.Run(v, func(t *testing.T) {
			clearEnv(t)
			t.Setenv("DLOCK_URL", "mem://x")
			t.Setenv(v, value)
			_, err := config.Load("")
			if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), v) {
				t.Errorf("got %v, want ErrInvalid naming %s", err, v)
			}
		})
	}
}
