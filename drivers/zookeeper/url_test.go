package zookeeper

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
)

func TestParseURL(t *testing.T) {
	for raw, want := range map[string]struct {
		servers string
		base    string
		timeout time.Duration
	}{
		"zk://h1":                                    {"h1:2181", DefaultBasePath, DefaultSessionTimeout},
		"zk://h1:2182,h2,h3:1/":                      {"h1:2182 h2:2181 h3:1", DefaultBasePath, DefaultSessionTimeout},
		"zk://h1/apps/locks?session_timeout=3s":      {"h1:2181", "/apps/locks", 3 * time.Second},
		"ZK://[::1]:2181/x":                          {"[::1]:2181", "/x", DefaultSessionTimeout},
		"zk://10.0.0.1,10.0.0.2/?session_timeout=1m": {"10.0.0.1:2181 10.0.0.2:2181", DefaultBasePath, time.Minute},
	} {
		servers, opts, err := parseURL(testkit.URL(t, raw))
		if err != nil {
			t.Errorf("parseURL(%q): %v", raw, err)
			continue
		}
		o := defaultOptions()
		if err := o.apply(opts); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(servers, " "); got != want.servers || o.base != want.base || o.sessionTimeout != want.timeout {
			t.Errorf("parseURL(%q) = %q, base %q, timeout %v; want %q, %q, %v", raw, got, o.base, o.sessionTimeout, want.servers, want.base, want.timeout)
		}
	}
}

func TestParseURLErrors(t *testing.T) {
	testkit.RefusesURLs(t, func(u *url.URL) error { _, _, err := parseURL(u); return err }, "secret",
		"redis://h1",
		"zk:h1",
		"zk://user:secret@h1",
		"zk://",
		"zk:///dlock",
		"zk://h1,,h2",
		"zk://h1:0",
		"zk://h1:65536",
		"zk://h1:x",
		"zk://:2181",
		"zk://h1/zookeeper",
		"zk://h1/zookeeper/locks",
		"zk://h1/a//b",
		"zk://h1/a/",
		"zk://h1/a/../b",
		"zk://h1?session_timeout=",
		"zk://h1?session_timeout=1ms",
		"zk://h1?session_timeout=-1s",
		"zk://h1?session_timeout=1s&session_timeout=2s",
		"zk://h1?chroot=/x",
		"zk://h1#frag",
	)
}

func TestOpenRefusesBadURL(t *testing.T) {
	if _, err := dlock.Open(t.Context(), "zk://h1/zookeeper"); !errors.Is(err, dlock.ErrInvalidURL) {
		t.Errorf("Open of a URL inside /zookeeper: got %v, want ErrInvalidURL", err)
	}
}
