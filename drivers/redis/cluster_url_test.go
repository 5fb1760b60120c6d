package redis

import (
	"net/url"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/internal/testkit"
)

func TestParseClusterURLGood(t *testing.T) {
	for _, c := range []struct {
		url    string
		addrs  []string
		user   string
		tls    bool
		prefix string
	}{
		{url: "redis+cluster://a:7000,b:7001", addrs: []string{"a:7000", "b:7001"}, prefix: DefaultKeyPrefix},
		{url: "redis+cluster://u:" + secret + "@a,b/0?dial_timeout=2s", addrs: []string{"a:6379", "b:6379"}, user: "u", prefix: DefaultKeyPrefix},
		{url: "rediss+cluster://a:7000/?key_prefix=app:", addrs: []string{"a:7000"}, tls: true, prefix: "app:"},
		{url: "redis+cluster:///?addr=[::1]:7000&addr=[::1]:7001", addrs: []string{"[::1]:7000", "[::1]:7001"}, prefix: DefaultKeyPrefix},
	} {
		opt, o, err := parseClusterURL(testkit.URL(t, c.url))
		if err != nil {
			t.Errorf("parseClusterURL(%q): %v", c.url, err)
			continue
		}
		if strings.Join(opt.Addrs, " ") != strings.Join(c.addrs, " ") || opt.Username != c.user ||
			(opt.TLSConfig != nil) != c.tls || o.prefix != c.prefix || !opt.ContextTimeoutEnabled {
			t.Errorf("parseClusterURL(%q) = addrs %v user %q TLS %v prefix %q context timeouts %v",
				c.url, opt.Addrs, opt.Username, opt.TLSConfig != nil, o.prefix, opt.ContextTimeoutEnabled)
		}
	}
}

func TestParseClusterURLBad(t *testing.T) {
	testkit.RefusesURLs(t, func(u *url.URL) error { _, _, err := parseClusterURL(u); return err }, secret,
		"redis://a:7000",                                                // not a Cluster scheme
		"redis+cluster:///",                                             // no nodes
		"redis+cluster://u:"+secret+"@a:7000/1",                         // no database but 0
		"redis+cluster://u:"+secret+"@a:7000,,b:1",                      // an empty node
		"redis+cluster://u:"+secret+"@a:7000,b:0",                       // a bad port
		"redis+cluster://u:"+secret+"@a:7000?foo="+secret,               // go-redis refuses it
		"redis+cluster://u:"+secret+"@a:7000?key_prefix={x}",            // a brace in the prefix
		"redis+cluster://u:"+secret+"@a:7000?key_prefix=a&key_prefix=b", // twice
	)
}
