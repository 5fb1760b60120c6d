package memcache

import (
	"strings"
	"testing"

	"github.com/dlock-go/dlock/internal/testkit"
)

// The package's shared server runs with memcached's defaults: evictions on.
func TestDoctorFindsEvictions(t *testing.T) {
	server.NeedFaults(t) // an external server's settings are its own
	testkit.ExpectFindings(t, testkit.Diagnose(t, server.URL, 0), checkEviction)
}

func TestDoctorClean(t *testing.T) {
	r := testkit.Diagnose(t, smallServer(t, "--disable-evictions"), 0)
	testkit.ExpectFindings(t, r)
	for _, c := range []string{checkEviction, checkMemory, checkCAS} {
		if !strings.Contains(strings.Join(r.Checks, ","), c) {
			t.Errorf("check %s did not run: %v", c, r.Checks)
		}
	}
}

func TestDoctorFindsCASDisabled(t *testing.T) {
	testkit.ExpectFindings(t, testkit.Diagnose(t, smallServer(t, "--disable-evictions", "--disable-cas"), 0), checkCAS)
}

// A server filled until it refuses items is full.
func TestDoctorFindsMemoryFull(t *testing.T) {
	url := smallServer(t, "--disable-evictions")
	addr := serverAddrs(t, url)[0]
	for round := 0; ; round++ {
		if round == 100 {
			t.Fatalf("memcached with 2 MB still stores items after %d rounds", round)
		}
		if reply := fill(t, addr, "dlock:doctor-fill-0123456789", 200, round, 500); reply != "STORED" {
			t.Logf("round %d: %s; stats: bytes %d, limit %d", round, reply, stat(t, addr, "bytes"), stat(t, addr, "limit_maxbytes"))
			break
		}
	}
	testkit.ExpectFindings(t, testkit.Diagnose(t, url, 0), checkMemory)
}

func TestCASProblem(t *testing.T) {
	for _, c := range []struct {
		version, cas string
		bad          bool
	}{
		{"1.6.18", "yes", false},
		{"1.2.4", "", false},
		{"1.2.2", "", true},
		{"1.6.18", "no", true},
		{"unknown", "", false},
	} {
		if got := casProblem(c.version, c.cas) != ""; got != c.bad {
			t.Errorf("casProblem(%q, %q) = %q", c.version, c.cas, casProblem(c.version, c.cas))
		}
	}
}
