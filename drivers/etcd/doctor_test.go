package etcd

import (
	"context"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// The package's server is a single member: a single point of failure.
func TestDoctorFindsSingleMember(t *testing.T) {
	server.Need(t)
	testkit.ExpectFindings(t, testkit.Diagnose(t, server.URL, 0), checkCluster)
}

// The default session TTL is 15 s: a 20 s lock cannot rest on it.
func TestDoctorFindsTTLAboveSession(t *testing.T) {
	server.Need(t)
	testkit.ExpectFindings(t, testkit.Diagnose(t, server.URL, 20*time.Second), checkTTL, checkCluster)
}

// A member with a 2 s election timeout raises leases to 3 s at least: a
// 1 s session lasts 3 s.
func TestDoctorFindsMinimumLeaseTTL(t *testing.T) {
	server.NeedFaults(t) // containers can be run
	srv := testserver.Own(t, testserver.StartTimeout, func(ctx context.Context) (*testserver.Server, error) {
		return testserver.StartEtcdTimed(ctx, []string{"--heartbeat-interval=100", "--election-timeout=2000"})
	})
	url := "etcd://" + srv.Addr() + "?" + sessionTTLParam + "=1s"
	testkit.ExpectFindings(t, testkit.Diagnose(t, url, time.Second), checkLeaseTTL, checkCluster)
}

// A raised NOSPACE alarm (raised here by hand, as etcd does when its
// database reaches its quota) stops every write.
func TestDoctorFindsAlarm(t *testing.T) {
	server.NeedFaults(t) // the alarm must not reach an external cluster
	cli := newCli(t)
	ctx := ctxFor(t)
	st, err := cli.Status(ctx, endpoints(t)[0])
	if err != nil {
		t.Fatal(err)
	}
	alarm := &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: st.Header.MemberId, Alarm: pb.AlarmType_NOSPACE}
	if _, err := pb.NewMaintenanceClient(cli.ActiveConnection()).Alarm(ctx, alarm); err != nil {
		t.Fatalf("raise NOSPACE: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := cli.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: st.Header.MemberId, Alarm: pb.AlarmType_NOSPACE}); err != nil {
			t.Errorf("disarm: %v", err)
		}
	})
	r := testkit.Diagnose(t, server.URL, 0)
	if !r.Has(checkAlarms) || !r.Has(checkCluster) || len(r.Findings) != 2 {
		t.Errorf("findings %+v, want the alarm and the single member", r.Findings)
	}
	if len(r.Skipped) != 1 || r.Skipped[0].Check != checkLeaseTTL {
		t.Errorf("skipped %+v, want the lease check", r.Skipped)
	}
}

// A 3-member cluster with the default session and TTL is clean.
func TestDoctorCleanCluster(t *testing.T) {
	server.NeedFaults(t) // containers can be run
	c := testserver.Own(t, 5*time.Minute, func(ctx context.Context) (*testserver.EtcdCluster, error) {
		return testserver.StartEtcdCluster(ctx, 3)
	})
	testkit.ExpectFindings(t, testkit.Diagnose(t, "etcd://"+strings.Join(c.Addrs(), ","), 0))
}

func TestVersionProblem(t *testing.T) {
	for v, bad := range map[string]bool{"3.4.23": false, "3.5.2": true, "3.5.3": false, "3.3.27": true, "3.6.0": false, "x": false} {
		if got := versionProblem(v) != ""; got != bad {
			t.Errorf("versionProblem(%q) = %q", v, versionProblem(v))
		}
	}
}
