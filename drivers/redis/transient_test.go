package redis

import (
	"errors"
	"fmt"
	"testing"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/dlock-go/dlock/internal/testkit"
)

// The "not now" replies come out of opErr marked transient (a Transient
// method in the chain, which the core's waiting Lock looks for), still
// matching what they wrap; other errors come out unchanged.
func TestNotNowIsTransient(t *testing.T) {
	d := &Driver{}
	for _, err := range []error{
		errors.New("CLUSTERDOWN The cluster is down"),
		errors.New("TRYAGAIN Multiple keys request during rehashing of slot"),
		errors.New("LOADING Redis is loading the dataset in memory"),
		errors.New("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'"),
		goredis.ErrPoolTimeout,
		fmt.Errorf("redis: redlock: 1 of 5 masters granted: %w", errors.Join(errors.New("m1: CLUSTERDOWN x"), goredis.ErrPoolTimeout)),
	} {
		got := d.opErr(err)
		m, ok := errors.AsType[interface {
			error
			Transient() bool
		}](got)
		if !ok || !m.Transient() {
			t.Errorf("opErr(%q) = %#v: not marked transient", err, got)
		}
		if !errors.Is(got, err) || got.Error() != err.Error() {
			t.Errorf("opErr(%q) = %q: no longer matches the error it wraps", err, got)
		}
		if again := d.opErr(got); again != got {
			t.Errorf("opErr marked %q twice", err)
		}
	}
	for _, err := range []error{
		errors.New("NOSCRIPT No matching script"),
		errors.New("WRONGTYPE Operation against a key holding the wrong kind of value"),
		errors.New("NOPERM User has no permissions to run the 'evalsha' command"),
	} {
		if got := d.opErr(err); got != err {
			t.Errorf("opErr(%q) = %#v, want it unchanged", err, got)
		}
	}
}

// The clients the driver makes from URLs run without go-redis's
// maintenance notifications (see maintOff).
func TestURLClientsWithoutMaintNotifications(t *testing.T) {
	single, _, err := parseURL(testkit.URL(t, "redis://localhost:6379/0"))
	if err != nil {
		t.Fatal(err)
	}
	cluster, _, err := parseClusterURL(testkit.URL(t, "redis+cluster://a:7000,b:7001"))
	if err != nil {
		t.Fatal(err)
	}
	masters, _, err := parseRedLockURL(testkit.URL(t, "redlock://a:6379,b:6379,c:6379"))
	if err != nil {
		t.Fatal(err)
	}
	configs := []*maintnotifications.Config{single.MaintNotificationsConfig, cluster.MaintNotificationsConfig}
	for _, m := range masters {
		configs = append(configs, m.MaintNotificationsConfig)
	}
	for i, c := range configs {
		if c == nil || c.Mode != maintnotifications.ModeDisabled {
			t.Errorf("client options %d: maintenance notifications %+v, want disabled", i, c)
		}
	}
}
