package etcd

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock/doctor"
)

// The checks `dlock doctor` runs on an etcd cluster, by name.
const (
	checkVersion  = "etcd.version"
	checkCluster  = "etcd.cluster"
	checkAlarms   = "etcd.alarms"
	checkLeaseTTL = "etcd.min-lease-ttl"
	checkTTL      = "etcd.ttl"
)

func init() { doctor.Register(Scheme, diagnose) }

// diagnose is the doctor of the etcd scheme: it connects as dlock.Open
// does, then asks every member for its status, lists alarms, and grants
// (and revokes) a 1-second lease to learn the cluster's minimum lease TTL.
func diagnose(ctx context.Context, req doctor.Request, r *doctor.Report) error {
	connectCtx, cancel := req.Connecting(ctx)
	defer cancel()
	dd, err := open(connectCtx, req.URL)
	if err != nil {
		return err
	}
	d := dd.(*Driver)
	defer d.Close()
	if err := diagnoseMembers(ctx, d.cli, r); err != nil {
		return err
	}
	alarmed, err := diagnoseAlarms(ctx, d.cli, r)
	if err != nil {
		return err
	}
	if alarmed {
		// A cluster out of space grants no lease.
		r.Skip(checkLeaseTTL, fmt.Errorf("alarms are raised"))
	} else if err := diagnoseLeaseTTL(ctx, d.cli, d.ttl, r); err != nil {
		return err
	}
	r.Ran(checkTTL)
	if req.TTL > d.ttl {
		r.Hazard(doctor.Finding{
			Check:  checkTTL,
			Hazard: fmt.Sprintf("the TTL %v exceeds the session TTL %v", req.TTL, d.ttl),
			Why:    "every lock rests on the client's session lease, which a silent client loses after the session TTL: the driver refuses a longer TTL (ErrInvalidTTL), so no lock of it can be taken",
			Fix:    fmt.Sprintf("set session_ttl=%v (or more) in the URL, or a TTL of at most %v", req.TTL, d.ttl),
		})
	}
	return nil
}

// diagnoseMembers asks every member for its status: its version, whether
// it answers and knows a leader, and how many members there are.
func diagnoseMembers(ctx context.Context, cli *clientv3.Client, r *doctor.Report) error {
	r.Ran(checkVersion)
	r.Ran(checkCluster)
	list, err := cli.MemberList(ctx)
	if err != nil {
		return fmt.Errorf("etcd: member list: %w", err)
	}
	var problems, versions []string
	voters := 0
	for _, m := range list.Members {
		if m.IsLearner {
			continue
		}
		voters++
		if len(m.ClientURLs) == 0 {
			problems = append(problems, fmt.Sprintf("member %s has not started", m.Name))
			continue
		}
		st, err := cli.Status(ctx, strings.TrimPrefix(strings.TrimPrefix(m.ClientURLs[0], "http://"), "https://"))
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("member %s does not answer (%v)", m.Name, err))
		case st.Leader == 0:
			problems = append(problems, fmt.Sprintf("member %s knows no leader", m.Name))
		default:
			if !strings.Contains(strings.Join(versions, ","), st.Version) {
				versions = append(versions, st.Version)
			}
			if problem := versionProblem(st.Version); problem != "" {
				r.Hazard(doctor.Finding{
					Check:  checkVersion,
					Hazard: fmt.Sprintf("member %s runs etcd %s", m.Name, st.Version),
					Why:    problem,
					Fix:    "upgrade to the latest patch release of etcd 3.5 or later",
				})
			}
		}
	}
	r.Fact("version", "etcd %s", strings.Join(versions, ", "))
	r.Fact("members", "%d voting", voters)
	if len(problems) > 0 {
		r.Hazard(doctor.Finding{
			Check:  checkCluster,
			Hazard: "the cluster is unhealthy: " + strings.Join(problems, "; "),
			Why:    "a member that is down or cut off from the leader serves no lock request, and one more failure may cost the quorum: then no lock can be taken or renewed and every lease runs out",
			Fix:    "bring the members back (etcdctl endpoint health, endpoint status) or replace them (etcdctl member remove/add)",
		})
	}
	if voters < 3 {
		r.Hazard(doctor.Finding{
			Check:  checkCluster,
			Hazard: fmt.Sprintf("the cluster has %d voting member(s)", voters),
			Why:    "with fewer than 3 members no member may fail: one down and no lock can be taken, renewed or released until it is back, and every lease runs out",
			Fix:    "run 3 (or 5) members on separate hosts and list them all in the URL",
		})
	}
	return nil
}

// versionProblem says why etcd version is a hazard to locks, or "".
func versionProblem(version string) string {
	var major, minor, patch int
	if n, _ := fmt.Sscanf(version, "%d.%d.%d", &major, &minor, &patch); n < 2 {
		return ""
	}
	switch {
	case major < 3 || major == 3 && minor < 4:
		return "etcd before 3.4 is out of support, and does not carry the fixes to leases and watches since"
	case major == 3 && minor == 5 && patch <= 2:
		return "etcd 3.5.0 to 3.5.2 can lose acknowledged writes on a crash (the data inconsistency the etcd project warned of): a grant may be forgotten and given again"
	}
	return ""
}

// diagnoseAlarms reports raised alarms: NOSPACE makes the cluster refuse
// writes, CORRUPT marks a member whose data differs. It returns whether
// any is raised.
func diagnoseAlarms(ctx context.Context, cli *clientv3.Client, r *doctor.Report) (bool, error) {
	r.Ran(checkAlarms)
	resp, err := cli.AlarmList(ctx)
	if err != nil {
		return false, fmt.Errorf("etcd: alarm list: %w", err)
	}
	if len(resp.Alarms) == 0 {
		return false, nil
	}
	var alarms []string
	for _, a := range resp.Alarms {
		alarms = append(alarms, fmt.Sprintf("%v on member %x", a.Alarm, a.MemberID))
	}
	r.Hazard(doctor.Finding{
		Check:  checkAlarms,
		Hazard: "alarms are raised: " + strings.Join(alarms, ", "),
		Why:    "with NOSPACE the cluster refuses writes, so no lock can be taken and no lease granted; CORRUPT means members disagree on the data, locks included",
		Fix:    "for NOSPACE: compact, defragment and raise --quota-backend-bytes, then etcdctl alarm disarm; for CORRUPT: replace the corrupt member",
	})
	return true, nil
}

// diagnoseLeaseTTL grants a 1-second lease, reads the TTL etcd gave it (it
// raises short leases to 1.5 election timeouts) and revokes it.
func diagnoseLeaseTTL(ctx context.Context, cli *clientv3.Client, session time.Duration, r *doctor.Report) error {
	r.Ran(checkLeaseTTL)
	grant, err := cli.Grant(ctx, 1)
	if err != nil {
		return fmt.Errorf("etcd: grant a lease: %w", err)
	}
	if _, err := cli.Revoke(ctx, grant.ID); err != nil {
		return fmt.Errorf("etcd: revoke the doctor's lease %x: %w", grant.ID, err)
	}
	least := time.Duration(grant.TTL) * time.Second
	r.Fact("minimum lease TTL", "%v", least)
	if least <= session {
		return nil
	}
	r.Hazard(doctor.Finding{
		Check:  checkLeaseTTL,
		Hazard: fmt.Sprintf("the cluster's minimum lease TTL is %v, above the session TTL %v", least, session),
		Why:    "etcd raises a shorter lease to its minimum (1.5 election timeouts), so a client that crashed keeps its locks that long, not the session TTL the driver was given",
		Fix:    fmt.Sprintf("set session_ttl to %v or more, or lower the members' --election-timeout", least),
	})
	return nil
}
