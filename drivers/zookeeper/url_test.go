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
	type parsed struct {
		servers, base string
		timeout       time.Duration
	}
	testkit.ParsesURLs(t, func(u *url.URL) (parsed, error) {
		servers, opts, err := parseURL(u)
		o := defaultOptions()
		if err == nil {
			err = o.apply(opts)
		}
		return parsed{strings.Join(servers, " "), o.base, o.sessionTTL}, err
	}, map[string]parsed{
		"zk://h1":                                    {"h1:2181", DefaultBasePath, DefaultSessionTTL},
		"zk://h1:2182,h2,h3:1/":                      {"h1:2182 h2:2181 h3:1", DefaultBasePath, DefaultSessionTTL},
		"zk://h1/apps/locks?session_ttl=3s":          {"h1:2181", "/apps/locks", 3 * time.Second},
		"ZK://[::1]:2181/x":                          {"[::1]:2181", "/x", DefaultSessionTTL},
		"zk://10.0.0.1,10.0.0.2/?session_timeout=1m": {"10.0.0.1:2181 10.0.0.2:2181", DefaultBasePath, time.Minute},
	})
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
		"zk://h1?session_timeout=1s&session_ttl=2s",
		"zk://h1?session_ttl=1ms",
		"zk://h1?chroot=/x",
		"zk://h1#frag",
	)
}

func TestOpenRefusesBadURL(t *testing.T) {
	if _, err := dlock.Open(t.Context(), "zk://h1/zookeeper"); !errors.Is(err, dlock.ErrInvalidURL) {
		t.Errorf("Open of a URL inside /zookeeper: got %v, want ErrInvalidURL", err)
	}
}
