package postgres

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
)

func TestParseURL(t *testing.T) {
	type parsed struct {
		host     string
		port     uint16
		database string
		opts     options
		appName  string // the server's application_name
		leaked   bool   // the driver's own parameter reached the server settings
	}
	testkit.ParsesURLs(t, func(u *url.URL) (parsed, error) {
		cfg, opts, err := parseURL(u)
		if err != nil {
			return parsed{}, err
		}
		o, err := defaultOptions().with(opts)
		_, leaked := cfg.RuntimeParams["dlock_max_conns"]
		return parsed{cfg.Host, cfg.Port, cfg.Database, o, cfg.RuntimeParams["application_name"], leaked}, err
	}, map[string]parsed{
		"postgres://u:p@db.example:5433/app":            {host: "db.example", port: 5433, database: "app", opts: defaultOptions(), appName: "dlock"},
		"postgresql://u@db.example/app?sslmode=disable": {host: "db.example", port: 5432, database: "app", opts: defaultOptions(), appName: "dlock"},
		"POSTGRES://u@[::1]:6000/app?sslmode=disable":   {host: "::1", port: 6000, database: "app", opts: defaultOptions(), appName: "dlock"},
		"postgres://u@h/app?sslmode=disable&dlock_max_conns=7&dlock_max_idle_time=90s&dlock_schema=locks": {
			host: "h", port: 5432, database: "app", appName: "dlock",
			opts: options{maxConns: 7, maxIdleTime: 90 * time.Second, schema: "locks"},
		},
	})
}

func TestParseURLErrors(t *testing.T) {
	const secret = "s3cr3t-pw"
	testkit.RefusesURLs(t, func(u *url.URL) error { _, _, err := parseURL(u); return err }, secret,
		"redis://u:"+secret+"@h/db",
		"postgres:u:"+secret+"@h/db",
		"postgres://u:"+secret+"@h/db?dlock_max_conns=0",
		"postgres://u:"+secret+"@h/db?dlock_max_conns=x",
		"postgres://u:"+secret+"@h/db?dlock_max_conns=1&dlock_max_conns=2",
		"postgres://u:"+secret+"@h/db?dlock_max_idle_time=-1s",
		"postgres://u:"+secret+"@h/db?dlock_schema=",
		"postgres://u:"+secret+"@h:99999/db",
		"postgres://u:"+secret+"@h/db?sslmode=bogus",
	)
}

func TestOpen(t *testing.T) {
	server.Need(t)
	ctx := ctxFor(t)
	for _, scheme := range []string{Scheme, SchemeAlt} {
		raw := scheme + strings.TrimPrefix(server.URL, strings.SplitN(server.URL, "://", 2)[0])
		c, err := dlock.Open(ctx, raw, dlock.WithTTL(5*time.Second))
		if err != nil {
			t.Fatalf("dlock.Open(%s://...): %v", scheme, err)
		}
		m := testkit.Mutex(t, c, testkit.Key(t))
		l, err := m.Lock(ctx)
		if err != nil {
			t.Fatalf("Lock: %v", err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		if err := c.Close(ctx); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
}

func TestOpenFailsEarly(t *testing.T) {
	server.Need(t)
	u, err := url.Parse(server.URL)
	if err != nil {
		t.Fatal(err)
	}
	const secret = "not-the-password"
	u.User = url.UserPassword(u.User.Username(), secret)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = dlock.Open(ctx, u.String())
	if err == nil {
		t.Fatal("Open with a wrong password succeeded")
	}
	if strings.Contains(err.Error(), secret) {
		t.Fatalf("the error shows the password: %v", err)
	}
	t.Logf("wrong password: %v", err)

	// Nothing listens there: Open fails, bounded by its context.
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := dlock.Open(ctx, "postgres://u:"+secret+"@127.0.0.1:1/db?sslmode=disable&connect_timeout=2"); err == nil || strings.Contains(err.Error(), secret) {
		t.Fatalf("Open of a closed port: got %v, want an error without the password", err)
	}
}
