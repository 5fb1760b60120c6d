package zookeeper

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// The package's server is standalone: a single point of failure.
func TestDoctorFindsStandalone(t *testing.T) {
	server.Need(t)
	testkit.ExpectFindings(t, testkit.Diagnose(t, server.URL, 0), checkEnsemble)
}

// The test servers' maxSessionTimeout is 300 ticks, 60 s: a session asked
// for 90 s gets 60 s.
func TestDoctorFindsClampedSession(t *testing.T) {
	server.Need(t)
	url := testkit.WithQuery(t, server.URL, sessionTTLParam, "90s")
	testkit.ExpectFindings(t, testkit.Diagnose(t, url, 90*time.Second), checkSession, checkEnsemble)
}

func TestDoctorFindsTTLOutsideSession(t *testing.T) {
	server.Need(t)
	testkit.ExpectFindings(t, testkit.Diagnose(t, server.URL, time.Second), checkTTL, checkEnsemble)
}

// A 3-member ensemble with the default session and TTL is clean.
func TestDoctorCleanEnsemble(t *testing.T) {
	server.NeedFaults(t) // containers can be run
	e := testserver.Own(t, 5*time.Minute, func(ctx context.Context) (*testserver.ZooKeeperEnsemble, error) {
		return testserver.StartZooKeeperEnsemble(ctx, 3)
	})
	var addrs []string
	for _, m := range e.Members {
		addrs = append(addrs, m.Addr())
	}
	r := testkit.Diagnose(t, "zk://"+strings.Join(addrs, ","), 0)
	testkit.ExpectFindings(t, r)
}
