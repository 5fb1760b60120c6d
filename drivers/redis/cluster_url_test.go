package redis

import (
	"net/url"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/internal/testkit"
)

func TestParseClusterURLGood(t *testing.T) {
	type parsed struct {
		addrs, user        string
		tls                bool
		prefix             string
		contextTimeoutsOff bool
	}
	testkit.ParsesURLs(t, func(u *url.URL) (parsed, error) {
		opt, o, err := parseClusterURL(u)
		if err != nil {
			return parsed{}, err
		}
		return parsed{strings.Join(opt.Addrs, " "), opt.Username, opt.TLSConfig != nil, o.prefix, !opt.ContextTimeoutEnabled}, nil
	}, map[string]parsed{
		"redis+cluster://a:7000,b:7001":                          {addrs: "a:7000 b:7001", prefix: DefaultKeyPrefix},
		"redis+cluster://u:" + secret + "@a,b/0?dial_timeout=2s": {addrs: "a:6379 b:6379", user: "u", prefix: DefaultKeyPrefix},
		"rediss+cluster://a:7000/?key_prefix=app:":               {addrs: "a:7000", tls: true, prefix: "app:"},
		"redis+cluster:///?addr=[::1]:7000&addr=[::1]:7001":      {addrs: "[::1]:7000 [::1]:7001", prefix: DefaultKeyPrefix},
	})
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
