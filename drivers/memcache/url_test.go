package memcache

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

func TestParseURL(t *testing.T) {
	type parsed struct {
		servers string
		timeout time.Duration
		idle    int
		prefix  string
	}
	testkit.ParsesURLs(t, func(u *url.URL) (parsed, error) {
		cfg, err := parseURL(u)
		return parsed{strings.Join(cfg.servers, " "), cfg.timeout, cfg.maxIdle, cfg.opts.prefix}, err
	}, map[string]parsed{
		"memcache://localhost":        {"localhost:11211", DefaultTimeout, DefaultMaxIdleConns, DefaultKeyPrefix},
		"memcached://10.0.0.1:11311/": {"10.0.0.1:11311", DefaultTimeout, DefaultMaxIdleConns, DefaultKeyPrefix},
		"MEMCACHE://a:1,b,c:3":        {"a:1 b:11211 c:3", DefaultTimeout, DefaultMaxIdleConns, DefaultKeyPrefix},
		"memcache://[::1]":            {"[::1]:11211", DefaultTimeout, DefaultMaxIdleConns, DefaultKeyPrefix},
		"memcache://[::1]:11212":      {"[::1]:11212", DefaultTimeout, DefaultMaxIdleConns, DefaultKeyPrefix},
		"memcache://h?timeout=2s&max_idle_conns=32&key_prefix=app:": {"h:11211", 2 * time.Second, 32, "app:"},
		"memcache://h?key_prefix=":                                  {"h:11211", DefaultTimeout, DefaultMaxIdleConns, ""},
	})
}

func TestParseURLRejects(t *testing.T) {
	testkit.RefusesURLs(t, func(u *url.URL) error { _, err := parseURL(u); return err }, "secret",
		"redis://h:6379",
		"memcache:h:11211",
		"memcache://",
		"memcache://,",
		"memcache://a,,b",
		"memcache://a,b,a",
		"memcache://a:11211,a",
		"memcache://a:0",
		"memcache://a:65536",
		"memcache://a:1,::1",
		"memcache://user:secret@h",
		"memcache://h/db",
		"memcache://h#frag",
		"memcache://h?timeout=0s",
		"memcache://h?timeout=soon",
		"memcache://h?max_idle_conns=0",
		"memcache://h?max_idle_conns=x",
		"memcache://h?key_prefix=has%20space",
		"memcache://h?key_prefix=a&key_prefix=b",
		"memcache://h?pool_size=3",
		"memcache://h?%zz",
	)
	u, _ := url.Parse("memcache://" + strings.TrimSuffix(strings.Repeat("h:1,", 65), ","))
	if _, err := parseURL(u); !errors.Is(err, dlock.ErrInvalidURL) {
		t.Errorf("parseURL of 65 servers: got %v, want ErrInvalidURL", err)
	}
}

func TestOpen(t *testing.T) {
	server.Need(t)
	for _, scheme := range []string{Scheme, SchemeAlias} {
		raw := strings.Replace(server.URL, "memcache://", scheme+"://", 1) + "?key_prefix=open-test:"
		c, err := dlock.Open(ctxFor(t), raw, dlock.WithTTL(testTTL))
		if err != nil {
			t.Fatalf("Open(%q): %v", raw, err)
		}
		m := testkit.Mutex(t, c, testkit.Key(t))
		l := testkit.Lock(t, ctxFor(t), m)
		if err := l.Unlock(ctxFor(t)); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(ctxFor(t)); err != nil {
			t.Fatal(err)
		}
	}

	// No server: Open fails there, not at the first Lock.
	if _, err := dlock.Open(ctxFor(t), "memcache://127.0.0.1:1?timeout=1s"); err == nil || errors.Is(err, dlock.ErrInvalidURL) {
		t.Errorf("Open of a port where nothing listens: got %v, want a connection error", err)
	}
	if _, err := dlock.Open(ctxFor(t), "memcache://a:1,::1"); !errors.Is(err, dlock.ErrInvalidURL) {
		t.Errorf("Open of a bad URL: got %v, want ErrInvalidURL", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := dlock.Open(ctx, server.URL); !errors.Is(err, context.Canceled) || !errors.Is(err, dlock.ErrUnavailable) {
		t.Errorf("Open with a cancelled context: got %v, want ErrUnavailable wrapping context.Canceled", err)
	}
}

func TestMemcachedTargetExternal(t *testing.T) {
	const url = "memcache://127.0.0.1:1"
	t.Setenv(testserver.EnvMemcachedURL, url)
	target, err := testserver.MemcachedTarget(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if target.URL != url || target.Server != nil || target.Faults() {
		t.Fatalf("MemcachedTarget with %s set = %+v, want external %s without faults", testserver.EnvMemcachedURL, target, url)
	}
}

func TestPingMemcached(t *testing.T) {
	server.Need(t)
	if err := testserver.PingMemcached(ctxFor(t), serverAddrs(t, server.URL)[0]); err != nil {
		t.Fatalf("PingMemcached of the test server: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := testserver.PingMemcached(ctx, "127.0.0.1:1"); err == nil {
		t.Fatal("PingMemcached of a port where nothing listens: want an error")
	}
}

// The core over the driver: the capabilities it lacks are refused, the
// TTL rules are its own, and a waiter gets the lock after a release.
func TestCoreOverDriver(t *testing.T) {
	mc := newMC(t)
	c1 := testkit.Client(t, newTestDriver(t, mc), dlock.WithTTL(testTTL))
	c2 := testkit.Client(t, newTestDriver(t, newMC(t)), dlock.WithTTL(testTTL))

	if _, err := c1.RWMutex(testkit.Key(t)); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("RWMutex: got %v, want ErrUnsupported", err)
	}
	if _, err := c1.Mutex(testkit.Key(t), dlock.WithOwner("me")); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("WithOwner: got %v, want ErrUnsupported", err)
	}
	if _, err := c1.Mutex(testkit.Key(t), dlock.WithTTL(2*time.Second)); !errors.Is(err, dlock.ErrInvalidTTL) || !strings.Contains(err.Error(), "driver's 5s to") || !strings.Contains(err.Error(), "whole seconds") {
		t.Errorf("WithTTL(2s): got %v, want ErrInvalidTTL naming the 5 s minimum and why", err)
	}

	key := testkit.Key(t)
	m1, _ := c1.Mutex(key)
	m2, _ := c2.Mutex(key)
	l1 := testkit.Lock(t, ctxFor(t), m1)
	if left := time.Until(l1.Deadline()); left > 2900*time.Millisecond || left < 2*time.Second {
		t.Errorf("deadline %v away, want just under the 2.9 s a 5 s TTL is guaranteed", left)
	}
	waiter := testkit.Go(func() (dlock.Lease, error) { return m2.Lock(ctxFor(t)) })
	if err := l1.Unlock(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	l2 := waiter.Within(t, 5*time.Second, "the waiter's Lock")
	if l2.Token() <= l1.Token() {
		t.Errorf("token %d after %d", l2.Token(), l1.Token())
	}
	if err := l2.Unlock(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
}
