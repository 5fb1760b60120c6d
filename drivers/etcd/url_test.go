package etcd

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
)

func TestParseURL(t *testing.T) {
	type parsed struct {
		endpoints, prefix string
		ttl               time.Duration
		user, password    string
	}
	testkit.ParsesURLs(t, func(u *url.URL) (parsed, error) {
		cfg, o, err := parseURL(u)
		return parsed{strings.Join(cfg.Endpoints, " "), o.prefix, o.ttl, cfg.Username, cfg.Password}, err
	}, map[string]parsed{
		"etcd://localhost": {"localhost:2379", DefaultKeyPrefix, DefaultSessionTTL, "", ""},
		"etcd://h1:2379,h2:2380,h3:2381/myapp?ttl=10s": {"h1:2379 h2:2380 h3:2381", "myapp", 10 * time.Second, "", ""},
		"etcd://h1,h2,h3:2381":                         {"h1:2379 h2:2379 h3:2381", DefaultKeyPrefix, DefaultSessionTTL, "", ""},
		"etcd://h1,h2,h3/myapp?ttl=10s":                {"h1:2379 h2:2379 h3:2379", "myapp", 10 * time.Second, "", ""},
		"etcd://h1,h2,h3/myapp?session_ttl=10s":        {"h1:2379 h2:2379 h3:2379", "myapp", 10 * time.Second, "", ""},
		"ETCD://[::1]:2379/":                           {"[::1]:2379", DefaultKeyPrefix, DefaultSessionTTL, "", ""},
		"etcd://[::1]/a/b?ttl=1m":                      {"[::1]:2379", "a/b", time.Minute, "", ""},
		"etcd://h//abs":                                {"h:2379", "/abs", DefaultSessionTTL, "", ""},
		"etcd://alice:s%40cret@h":                      {"h:2379", DefaultKeyPrefix, DefaultSessionTTL, "alice", "s@cret"},
	})
}

func TestBadURLs(t *testing.T) {
	testkit.RefusesURLs(t, func(u *url.URL) error { _, _, err := parseURL(u); return err }, "",
		"etcd:opaque",
		"etcd:///prefix",
		"etcd://h1,,h2",
		"etcd://h1:0",
		"etcd://h1:70000",
		"etcd://h1:x,h2:2379",
		"etcd://::1",
		"etcd://[::1",
		"etcd://[nothost]:2379",
		"etcd://[::1]x",
		"etcd://:2379",
		"etcd://h/prefix/",
		"etcd://h?ttl=0s",
		"etcd://h?ttl=500ms",
		"etcd://h?ttl=1500ms",
		"etcd://h?ttl=forever",
		"etcd://h?ttl=1s&ttl=2s",
		"etcd://h?ttl=1s&session_ttl=2s",
		"etcd://h?session_ttl=1500ms",
		"etcd://h?tls=true",
		"etcd://:pw@h",
		"etcd://h#frag",
		"redis://h",
	)
}

func TestURLErrorsHidePassword(t *testing.T) {
	for _, raw := range []string{"etcd://bob:hunter2@h1:0,h2:2379", "etcd://bob:hunter2@h?ttl=bad", "etcd://bob:hunter2@h?nope=1"} {
		_, _, err := parseURL(testkit.URL(t, raw))
		if err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: %v", raw, err)
		}
	}
	// Through dlock.Open, where nothing answers.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := dlock.Open(ctx, "etcd://bob:hunter2@127.0.0.1:1")
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("Open of an unreachable cluster: %v", err)
	}
}

func TestOptions(t *testing.T) {
	for _, ttl := range []time.Duration{0, -time.Second, 999 * time.Millisecond, 1500 * time.Millisecond, 200 * 365 * 24 * time.Hour} {
		if err := WithSessionTTL(ttl)(&options{}); !errors.Is(err, dlock.ErrInvalidOption) {
			t.Errorf("WithSessionTTL(%v): %v, want ErrInvalidOption", ttl, err)
		}
	}
	if err := WithKeyPrefix("a/")(&options{}); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Errorf("WithKeyPrefix(a/): %v, want ErrInvalidOption", err)
	}
	if _, err := New(nil); err == nil {
		t.Error("New(nil) succeeded")
	}
}
