package redis

import (
	"errors"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
)

func TestParseRedLockURLGood(t *testing.T) {
	for _, c := range []struct {
		url     string
		addrs   []string
		db      int
		tls     bool
		prefix  string
		timeout time.Duration
	}{
		{url: "redlock://a:1,b:2,c:3/0", addrs: []string{"a:1", "b:2", "c:3"}, prefix: DefaultKeyPrefix},
		{url: "redlock://u:" + secret + "@a,b/2", addrs: []string{"a:6379", "b:6379"}, db: 2, prefix: DefaultKeyPrefix},
		{url: "redlocks://a:1,b:2,c:3/0?node_timeout=20ms&key_prefix=x:", addrs: []string{"a:1", "b:2", "c:3"}, tls: true, prefix: "x:", timeout: 20 * time.Millisecond},
		{url: "redlock:///0?addr=[::1]:1&addr=[::2]:1&addr=c:3", addrs: []string{"[::1]:1", "[::2]:1", "c:3"}, prefix: DefaultKeyPrefix},
		{url: "redlock://a:1/0?addr=[::1]:1", addrs: []string{"a:1", "[::1]:1"}, prefix: DefaultKeyPrefix},
	} {
		opts, o, err := parseRedLockURL(testkit.URL(t, c.url))
		if err != nil {
			t.Errorf("parseRedLockURL(%q): %v", c.url, err)
			continue
		}
		var addrs []string
		for _, opt := range opts {
			addrs = append(addrs, opt.Addr)
			if opt.DB != c.db || (opt.TLSConfig != nil) != c.tls || !opt.ContextTimeoutEnabled {
				t.Errorf("parseRedLockURL(%q): master %s: db %d TLS %v context timeouts %v", c.url, opt.Addr, opt.DB, opt.TLSConfig != nil, opt.ContextTimeoutEnabled)
			}
		}
		if strings.Join(addrs, " ") != strings.Join(c.addrs, " ") || o.prefix != c.prefix || o.nodeTimeout != c.timeout {
			t.Errorf("parseRedLockURL(%q) = %v prefix %q timeout %v", c.url, addrs, o.prefix, o.nodeTimeout)
		}
	}
}

func TestParseRedLockURLBad(t *testing.T) {
	testkit.RefusesURLs(t, func(u *url.URL) error { _, _, err := parseRedLockURL(u); return err }, secret,
		"redis://a:1,b:2/0",                              // not a RedLock scheme
		"redlock:///0",                                   // no masters
		"redlock://u:"+secret+"@a:1,,b:2/0",              // an empty master
		"redlock://u:"+secret+"@a:1,b:99999/0",           // a bad port
		"redlock://u:"+secret+"@a:1,b:2/x",               // a bad database
		"redlock://u:"+secret+"@a,b/0?node_timeout=fast", // a bad timeout
		"redlock://u:"+secret+"@a,b/0?node_timeout=0s",
		"redlock://u:"+secret+"@a,b/0?node_timeout=1ms&node_timeout=2ms",
		"redlock://u:"+secret+"@a,b/0?foo="+secret, // go-redis refuses it
		"redlock:u:"+secret+"@a",                   // opaque
	)
}

func TestDistinctAddrs(t *testing.T) {
	lookup := func(host string) ([]netip.Addr, error) {
		switch host {
		case "alias":
			return []netip.Addr{netip.MustParseAddr("10.0.0.1")}, nil
		case "dual":
			return []netip.Addr{netip.MustParseAddr("10.0.0.9"), netip.MustParseAddr("::ffff:10.0.0.1")}, nil
		}
		return nil, errors.New("no such host")
	}
	for _, c := range []struct {
		addrs []string
		dup   bool
	}{
		{[]string{"a:1", "b:1", "a:2"}, false},
		{[]string{"a:1", "b:1", "a:1"}, true},
		{[]string{"A:1", "a.:1"}, true},
		{[]string{"localhost:7000", "127.0.0.1:7000"}, true},
		{[]string{"localhost:7000", "[::1]:7000"}, true},
		{[]string{"127.0.0.1:7000", "[::ffff:127.0.0.1]:7000"}, true},
		{[]string{"10.0.0.1:6379", "alias:6379"}, true},
		{[]string{"alias:6379", "dual:6379"}, true},
		{[]string{"alias:6379", "dual:6380"}, false},
		{[]string{"10.0.0.1:6379", "unknown:6379"}, false},
		{[]string{"h:06379", "h:6379"}, true},
		{[]string{"", ""}, false}, // unknown addresses are not compared
	} {
		err := distinctAddrs(c.addrs, lookup)
		if (err != nil) != c.dup {
			t.Errorf("distinctAddrs(%v) = %v, want duplicate %v", c.addrs, err, c.dup)
		}
	}
}

func TestRedLockOptions(t *testing.T) {
	if _, err := NewRedLock(nil); err == nil {
		t.Error("NewRedLock with no clients: want an error")
	}
	if err := WithNodeTimeout(time.Microsecond)(&options{}); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Errorf("WithNodeTimeout(1µs): got %v, want ErrInvalidOption", err)
	}
	r := &RedLock{}
	for _, c := range []struct{ ttl, want time.Duration }{
		{10 * time.Millisecond, 2 * time.Millisecond},
		{time.Second, 100 * time.Millisecond},
		{500 * time.Millisecond, 50 * time.Millisecond},
		{time.Minute, 100 * time.Millisecond},
	} {
		if got := r.nodeTimeout(c.ttl); got != c.want {
			t.Errorf("nodeTimeout(%v) = %v, want %v", c.ttl, got, c.want)
		}
	}
}
