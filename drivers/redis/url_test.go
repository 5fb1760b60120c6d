package redis

import (
	"context"
	"errors"
	"net"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
)

// secret is the password in the test URLs; no error may contain it.
const secret = "s3cr3t-PW"

func TestParseURLGood(t *testing.T) {
	type parsed struct {
		addr               string
		db                 int
		user, password     string
		tls                bool
		prefix             string
		contextTimeoutsOff bool
	}
	testkit.ParsesURLs(t, func(u *url.URL) (parsed, error) {
		opt, o, err := parseURL(u)
		if err != nil {
			return parsed{}, err
		}
		return parsed{opt.Addr, opt.DB, opt.Username, opt.Password, opt.TLSConfig != nil, o.prefix, !opt.ContextTimeoutEnabled}, nil
	}, map[string]parsed{
		"redis://localhost:6379/0":       {addr: "localhost:6379", prefix: DefaultKeyPrefix},
		"redis://host":                   {addr: "host:6379", prefix: DefaultKeyPrefix},
		"redis://:" + secret + "@host/3": {addr: "host:6379", db: 3, password: secret, prefix: DefaultKeyPrefix},
		"rediss://user:" + secret + "@host:6380/1?dial_timeout=3s": {addr: "host:6380", db: 1, user: "user", password: secret, tls: true, prefix: DefaultKeyPrefix},
		"REDIS://[::1]:6379/2":                          {addr: "[::1]:6379", db: 2, prefix: DefaultKeyPrefix},
		"redis://[fe80::1%25eth0]:7000":                 {addr: "[fe80::1%eth0]:7000", prefix: DefaultKeyPrefix},
		"redis://host/0?key_prefix=app1:&max_retries=2": {addr: "host:6379", prefix: "app1:"},
		"redis://host/0?key_prefix=":                    {addr: "host:6379", prefix: ""},
	})
}

func TestParseURLBad(t *testing.T) {
	testkit.RefusesURLs(t, func(u *url.URL) error { _, _, err := parseURL(u); return err }, secret,
		"http://u:"+secret+"@host:6379/0",                 // not our scheme
		"unix://u:"+secret+"@/tmp/redis.sock",             // go-redis takes it, we do not register it
		"redis://u:"+secret+"@host:99999/0",               // port out of range
		"redis://u:"+secret+"@host:0/0",                   // port 0
		"redis://::1:6379/0",                              // IPv6 without brackets
		"redis://u:"+secret+"@::1/0",                      // IPv6 without brackets, with a password
		"redis:"+secret,                                   // opaque
		"redis://u:"+secret+"@host/x",                     // bad database
		"redis://u:"+secret+"@host/0/1",                   // bad path
		"redis://u:"+secret+"@host/0?foo=bar",             // unknown option
		"redis://u:"+secret+"@host/0?max_retries="+secret, // bad option value
		"redis://host/0?password="+secret,                 // secret in the query
		"redis://u:"+secret+"@host/0?key_prefix={x}",
		"redis://u:"+secret+"@host/0?key_prefix=a&key_prefix=b",
	)
}

func TestRegistered(t *testing.T) {
	schemes := dlock.Schemes()
	for _, s := range []string{Scheme, SchemeTLS, SchemeCluster, SchemeClusterTLS, SchemeRedLock, SchemeRedLockTLS} {
		if !slices.Contains(schemes, s) {
			t.Errorf("scheme %q is not registered; have %v", s, schemes)
		}
	}
	// Through dlock.Open, a URL the driver refuses: ErrInvalidURL, no password.
	_, err := dlock.Open(t.Context(), "redis://u:"+secret+"@host:99999/0")
	if !errors.Is(err, dlock.ErrInvalidURL) || strings.Contains(err.Error(), secret) {
		t.Errorf("Open with a bad port: %v", err)
	}
}

func TestOpenUnreachable(t *testing.T) {
	// A port where nothing listens: the ping in Open fails there, and the
	// error is not about the URL and does not show the password.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err = dlock.Open(ctx, "redis://u:"+secret+"@"+addr+"/0?max_retries=-1")
	if err == nil || errors.Is(err, dlock.ErrInvalidURL) || strings.Contains(err.Error(), secret) {
		t.Fatalf("Open of %s: got %v, want a connection error without the password", addr, err)
	}
	t.Log(err)
}

func TestOpenOwnsClient(t *testing.T) {
	server.Need(t)
	ctx := ctxFor(t)
	dd, err := open(ctx, testkit.URL(t, server.URL+"?key_prefix=owned:"))
	if err != nil {
		t.Fatalf("open(%s): %v", server.URL, err)
	}
	d := dd.(*Driver)
	if d.prefix != "owned:" || !d.owned {
		t.Fatalf("open: prefix %q owned %v", d.prefix, d.owned)
	}
	l, err := d.Acquire(ctx, testkit.Request(testkit.Key(t), time.Second))
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := d.client.Ping(ctx).Err(); !errors.Is(err, goredis.ErrClosed) {
		t.Fatalf("Ping on the client of a closed Driver made from a URL: got %v, want ErrClosed", err)
	}

	// And through dlock.Open, end to end.
	c, err := dlock.Open(ctx, server.URL)
	if err != nil {
		t.Fatalf("dlock.Open(%s): %v", server.URL, err)
	}
	m := testkit.Mutex(t, c, testkit.Key(t))
	lease, err := m.Lock(ctx)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
}
