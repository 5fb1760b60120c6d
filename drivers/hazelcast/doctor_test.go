package hazelcast

import (
	"testing"

	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// The package's test member is alone.
func TestDoctorFindsSingleMember(t *testing.T) {
	server.Need(t)
	testkit.ExpectFindings(t, testkit.Diagnose(t, server.URL, 0), checkMembers)
}

// A 3-member cluster is clean. Three JVMs start, so -short skips it.
func TestDoctorCleanCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-member cluster; run without -short")
	}
	c := startCluster(t)
	testkit.ExpectFindings(t, testkit.Diagnose(t, testserver.HazelcastURL(c.Addrs()[0]), 0))
}
