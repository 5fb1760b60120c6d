package hazelcast

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hazelcast/hazelcast-go-client/logger"
	"github.com/hazelcast/hazelcast-go-client/types"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
)

func TestParseURL(t *testing.T) {
	type parsed struct {
		members, cluster, mapName string
		waitSlice                 time.Duration
		logLevel                  logger.Level
	}
	testkit.ParsesURLs(t, func(u *url.URL) (parsed, error) {
		cfg, o, err := parseURL(u)
		return parsed{strings.Join(cfg.Cluster.Network.Addresses, " "), cfg.Cluster.Name, o.mapName, o.waitSlice, cfg.Logger.Level}, err
	}, map[string]parsed{
		"hazelcast://m1:5701,m2:5702/prod":                      {"m1:5701 m2:5702", "prod", DefaultMap, DefaultWaitSlice, defaultLogLevel},
		"hazelcast://m1":                                        {"m1:5701", DefaultCluster, DefaultMap, DefaultWaitSlice, defaultLogLevel},
		"HAZELCAST://m1/":                                       {"m1:5701", DefaultCluster, DefaultMap, DefaultWaitSlice, defaultLogLevel},
		"hazelcast://m1,m2:5702/c":                              {"m1:5701 m2:5702", "c", DefaultMap, DefaultWaitSlice, defaultLogLevel},
		"hazelcast://10.0.0.1,10.0.0.2:5702/c":                  {"10.0.0.1:5701 10.0.0.2:5702", "c", DefaultMap, DefaultWaitSlice, defaultLogLevel},
		"hazelcast://[::1]:5702/c":                              {"[::1]:5702", "c", DefaultMap, DefaultWaitSlice, defaultLogLevel},
		"hazelcast://[fe80::1]/c":                               {"[fe80::1]:5701", "c", DefaultMap, DefaultWaitSlice, defaultLogLevel},
		"hazelcast://m1/my%20cluster?map=locks&wait_slice=10ms": {"m1:5701", "my cluster", "locks", 10 * time.Millisecond, defaultLogLevel},
	})
}

// net/url accepts a bracketed IPv6 address only as the whole host, so lists
// with one are built by hand here: parseMembers handles them.
func TestParseMembersWithIPv6(t *testing.T) {
	got, err := parseMembers("10.0.0.1,[::1]:5702,[fe80::1]")
	want := []string{"10.0.0.1:5701", "[::1]:5702", "[fe80::1]:5701"}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("parseMembers: %v, %v, want %v", got, err, want)
	}
}

func TestParseURLOptions(t *testing.T) {
	u, _ := url.Parse("hazelcast://user:p%40ss@m1/c?unisocket=true&tls=true&heartbeat_timeout=10s&log_level=off")
	cfg, _, err := parseURL(u)
	if err != nil {
		t.Fatalf("parseURL: %v", err)
	}
	c := cfg.Cluster
	switch {
	case !c.Unisocket, !c.Network.SSL.Enabled:
		t.Errorf("unisocket %t tls %t, want both", c.Unisocket, c.Network.SSL.Enabled)
	case c.HeartbeatTimeout != types.Duration(10*time.Second):
		t.Errorf("heartbeat timeout %v", c.HeartbeatTimeout)
	case c.Security.Credentials.Username != "user" || c.Security.Credentials.Password != "p@ss":
		t.Errorf("credentials %+v", c.Security.Credentials)
	case cfg.Logger.Level != logger.OffLevel:
		t.Errorf("log level %q", cfg.Logger.Level)
	}
}

func TestParseURLRefusesBadURLs(t *testing.T) {
	testkit.RefusesURLs(t, func(u *url.URL) error { _, _, err := parseURL(u); return err }, "s3cret",
		"redis://m1/c",
		"hazelcast:m1",
		"hazelcast:///c",
		"hazelcast://m1,,m2/c",
		"hazelcast://,m1/c",
		"hazelcast://m1:0/c",
		"hazelcast://m1:70000/c",
		"hazelcast://m1:x1/c",
		"hazelcast://::1/c",
		"hazelcast://[::1/c",
		"hazelcast://[::1]x/c",
		"hazelcast://:5701/c",
		"hazelcast://m1/a/b",
		"hazelcast://m1/c?map=",
		"hazelcast://m1/c?foo=1",
		"hazelcast://m1/c?map=a&map=b",
		"hazelcast://m1/c?wait_slice=0s",
		"hazelcast://m1/c?wait_slice=2m",
		"hazelcast://m1/c?wait_slice=soon",
		"hazelcast://m1/c?unisocket=maybe",
		"hazelcast://m1/c?tls=2",
		"hazelcast://m1/c?log_level=loud",
		"hazelcast://m1/c?heartbeat_timeout=0s",
		"hazelcast://user:s3cret@m1:0/c",
	)
}

func TestOpenRefusesBadURLs(t *testing.T) {
	testkit.NoLeaks(t)
	for _, raw := range []string{"hazelcast:///dev", "hazelcast://m1/dev?bogus=1", "hazelcast://u:s3cret@m1:0/dev"} {
		c, err := dlock.Open(context.Background(), raw)
		if err == nil {
			_ = c.Close(context.Background())
		}
		if !errors.Is(err, dlock.ErrInvalidURL) {
			t.Errorf("Open(%q): %v, want ErrInvalidURL", raw, err)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%q): the error shows the password: %v", raw, err)
		}
	}
	if !slices.Contains(dlock.Schemes(), Scheme) {
		t.Errorf("scheme %q is not registered: %v", Scheme, dlock.Schemes())
	}
}

func TestOptions(t *testing.T) {
	o := defaultOptions()
	for name, opt := range map[string]Option{
		"WithMap(\"\")":        WithMap(""),
		"WithMap(long)":        WithMap(strings.Repeat("m", maxMapName)),
		"WithWaitSlice(0)":     WithWaitSlice(0),
		"WithWaitSlice(2m)":    WithWaitSlice(2 * time.Minute),
		"WithWaitSlice(-1s)":   WithWaitSlice(-time.Second),
		"WithWaitSlice(999µs)": WithWaitSlice(999 * time.Microsecond),
	} {
		if err := opt(&o); !errors.Is(err, dlock.ErrInvalidOption) {
			t.Errorf("%s: %v, want ErrInvalidOption", name, err)
		}
	}
	if err := o.apply([]Option{nil, WithMap("m"), WithWaitSlice(time.Second)}); err != nil || o.mapName != "m" || o.waitSlice != time.Second {
		t.Errorf("apply: %v, %+v", err, o)
	}
	if _, err := New(context.Background(), nil); err == nil {
		t.Error("New with a nil client succeeded")
	}
}
