package redis

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

func TestParseSentinelURLGood(t *testing.T) {
	type parsed struct {
		sentinels, master string
		db                int
		user, password    string
		sentinelPassword  string
		tls               bool
		prefix            string
		acks              replicaAcks
	}
	testkit.ParsesURLs(t, func(u *url.URL) (parsed, error) {
		opt, o, err := parseSentinelURL(u)
		if err != nil {
			return parsed{}, err
		}
		if !opt.ContextTimeoutEnabled || (opt.TLSConfig != nil && opt.TLSConfig.ServerName != "") {
			t.Errorf("%s: context timeouts %v, TLS server name %q", u, opt.ContextTimeoutEnabled, opt.TLSConfig.ServerName)
		}
		return parsed{strings.Join(opt.SentinelAddrs, " "), opt.MasterName, opt.DB, opt.Username, opt.Password,
			opt.SentinelPassword, opt.TLSConfig != nil, o.prefix, o.acks}, nil
	}, map[string]parsed{
		"redis+sentinel://a,b:26380/m":                                               {sentinels: "a:26379 b:26380", master: "m", prefix: DefaultKeyPrefix},
		"redis+sentinel://u:" + secret + "@a:1/m/3":                                  {sentinels: "a:1", master: "m", db: 3, user: "u", password: secret, prefix: DefaultKeyPrefix},
		"rediss+sentinel://a/m?sentinel_password=" + secret:                          {sentinels: "a:26379", master: "m", sentinelPassword: secret, tls: true, prefix: DefaultKeyPrefix},
		"redis+sentinel:///?addr=[::1]:1&addr=[::1]:2&master_name=m&dial_timeout=2s": {sentinels: "[::1]:1 [::1]:2", master: "m", prefix: DefaultKeyPrefix},
		"redis+sentinel://[::1]/m/0?key_prefix=app:&replica_acks=2":                  {sentinels: "[::1]:26379", master: "m", prefix: "app:", acks: replicaAcks{n: 2}},
		"redis+sentinel://a/m?replica_acks=1&replica_ack_timeout=50ms":               {sentinels: "a:26379", master: "m", prefix: DefaultKeyPrefix, acks: replicaAcks{n: 1, timeout: 50 * time.Millisecond}},
	})
}

func TestParseSentinelURLBad(t *testing.T) {
	testkit.RefusesURLs(t, func(u *url.URL) error { _, _, err := parseSentinelURL(u); return err }, secret,
		"redis://a:26379/m",                                        // not a Sentinel scheme
		"redis+sentinel://u:"+secret+"@a:26379",                    // no master name
		"redis+sentinel://u:"+secret+"@a/m?master_name=n",          // named twice
		"redis+sentinel://u:"+secret+"@/m",                         // no sentinels
		"redis+sentinel://u:"+secret+"@a,,b/m",                     // an empty sentinel
		"redis+sentinel://u:"+secret+"@a:0/m",                      // a bad port
		"redis+sentinel://u:"+secret+"@a/m/x",                      // a bad database
		"redis+sentinel://u:"+secret+"@a/m/0/1",                    // a bad path
		"redis+sentinel://u:"+secret+"@a/m?foo="+secret,            // go-redis refuses it
		"redis+sentinel://u:"+secret+"@a/m?replica_only=true",      // reads from replicas: never for locks
		"redis+sentinel://u:"+secret+"@a/m?sentinel_username=x",    // a user without a password
		"redis+sentinel://u:"+secret+"@a/m?replica_acks=0",         // no replicas
		"redis+sentinel://u:"+secret+"@a/m?replica_ack_timeout=1s", // a timeout without a count
		"redis+sentinel://u:"+secret+"@a/m?replica_acks=1&replica_ack_timeout=0s",
		"redis+sentinel://u:"+secret+"@a/m?key_prefix={x}",
	)
}

// The replica parameters reach a single server's Driver, and the other
// multi-node schemes refuse them.
func TestReplicaAcksParams(t *testing.T) {
	_, o, err := parseURL(testkit.URL(t, "redis://h/0?replica_acks=1&replica_ack_timeout=20ms"))
	if err != nil || o.acks != (replicaAcks{n: 1, timeout: 20 * time.Millisecond}) {
		t.Errorf("redis:// with replica acks: %+v, %v", o.acks, err)
	}
	for _, raw := range []string{"redlock://a:1,b:2,c:3/0?replica_acks=1", "redis+cluster://a:1?replica_acks=1"} {
		if _, err := dlock.Open(t.Context(), raw); !errors.Is(err, dlock.ErrInvalidURL) {
			t.Errorf("Open(%s): %v, want ErrInvalidURL", raw, err)
		}
	}
	if _, err := New(goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}}), WithReplicaAcks(1, 0)); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Errorf("New over a Cluster with replica acks: %v, want ErrInvalidOption", err)
	}
	for _, opt := range []Option{WithReplicaAcks(0, 0), WithReplicaAcks(1, -time.Second)} {
		if _, err := New(offlineRDB(), opt); !errors.Is(err, dlock.ErrInvalidOption) {
			t.Errorf("New with a bad WithReplicaAcks: %v, want ErrInvalidOption", err)
		}
	}
	a := replicaAcks{n: 1}
	for ttl, want := range map[time.Duration]time.Duration{time.Second: 250 * time.Millisecond, time.Minute: time.Second, 2 * time.Millisecond: time.Millisecond} {
		if got := a.timeoutFor(ttl); got != want {
			t.Errorf("default WAIT timeout for a TTL of %v: %v, want %v", ttl, got, want)
		}
	}
	if got := (replicaAcks{n: 1, timeout: time.Second}).timeoutFor(time.Second); got != 500*time.Millisecond {
		t.Errorf("a WAIT timeout of 1s for a TTL of 1s: %v, want 500ms", got)
	}
}

func TestSentinelRegistered(t *testing.T) {
	for _, s := range []string{SchemeSentinel, SchemeSentinelTLS} {
		_, err := dlock.Open(t.Context(), s+"://u:"+secret+"@a:0/m")
		if !errors.Is(err, dlock.ErrInvalidURL) || strings.Contains(err.Error(), secret) {
			t.Errorf("Open(%s://...) with a bad port: %v", s, err)
		}
	}
}

// Open of a Sentinel URL whose sentinel refuses connections or never
// answers fails within its connect timeout, as the other schemes do.
func TestOpenSentinelFailsFast(t *testing.T) {
	testkit.OpenFailsFast(t, func(addr string) string { return "redis+sentinel://" + addr + "/m/0" }, testserver.IgnoreOwnGoroutines()...)
}
