package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/doctor"
	"github.com/dlock-go/dlock/internal/testkit"
)

// The test server runs without persistence: a hazard, one line with why
// and how to fix it, and status 78; in JSON, the check's name.
func TestDoctorFindsHazard(t *testing.T) {
	server.NeedFaults(t) // an external server's configuration is its own
	code, stdout, stderr := runWithin(t, "doctor", "--url", server.URL)
	if code != exitHazard || !strings.Contains(stdout, "HAZARD redis.persistence: persistence is off") ||
		!strings.Contains(stdout, "Why: ") || !strings.Contains(stdout, "Fix: ") || stderr != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want %d and the persistence hazard", code, stdout, stderr, exitHazard)
	}

	code, stdout, _ = runWithin(t, "doctor", "--url", server.URL, "--json")
	var r doctor.Report
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("--json: %v in %q", err, stdout)
	}
	if code != exitHazard || r.Backend != "redis" || len(r.Findings) != 1 || r.Findings[0].Check != "redis.persistence" {
		t.Errorf("--json: exit %d, %s", code, stdout)
	}
}

// With snapshots on, the same server is clean: status 0.
func TestDoctorClean(t *testing.T) {
	server.NeedFaults(t)
	opt, err := goredis.ParseURL(server.URL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := goredis.NewClient(opt)
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rdb.ConfigSet(ctx, "save", "3600 1").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.ConfigSet(context.Background(), "save", "").Err() })
	code, stdout, stderr := runWithin(t, "doctor", "--url", server.URL)
	if code != exitOK || !strings.Contains(stdout, "redis: no hazard found") {
		t.Errorf("exit %d, stdout %q, stderr %q; want 0", code, stdout, stderr)
	}
}

// A backend that is down, or that accepts connections and never answers,
// ends doctor with 69 in time, on every backend it can examine; one it
// cannot examine is a usage error.
func TestDoctorUnreachable(t *testing.T) {
	paths := map[string]string{"redis": "/0", "memcache": "", "postgres": "/db", "zk": "/x", "etcd": "/x"}
	for scheme, path := range paths {
		for name, addr := range map[string]func(testing.TB) string{"refused": testkit.ClosedAddr, "silent": testkit.SilentAddr} {
			t.Run(scheme+"/"+name, func(t *testing.T) {
				url := scheme + "://" + addr(t) + path
				code, stdout, stderr := runWithin(t, "doctor", "--url", url, "--connect-timeout", "1s")
				if code != exitUnavailable || !strings.HasPrefix(stderr, "dlock: backend "+scheme+": ") || stdout != "" {
					t.Errorf("exit %d, stdout %q, stderr %q; want %d", code, stdout, stderr, exitUnavailable)
				}
			})
		}
	}
	if code, _, stderr := runWithin(t, "doctor", "--url", "mem://x"); code != exitUsage || !strings.Contains(stderr, "no checks") {
		t.Errorf("mem://: exit %d (%s), want %d", code, stderr, exitUsage)
	}
}
