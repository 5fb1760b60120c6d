package hazelcast

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/hazelcast/hazelcast-go-client"
	"github.com/hazelcast/hazelcast-go-client/cluster"
	"github.com/hazelcast/hazelcast-go-client/types"

	"github.com/dlock-go/dlock/doctor"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/urlparams"
)

// checkMembers is the check `dlock doctor` runs on a Hazelcast cluster.
const checkMembers = "hazelcast.members"

func init() { doctor.Register(Scheme, diagnose) }

// diagnose is the doctor of the hazelcast scheme: it connects as
// dlock.Open does and counts the cluster's members. What it cannot cure,
// that map locks are not safe across a network partition on any number of
// members (see the package documentation), it does not report each time.
func diagnose(ctx context.Context, req doctor.Request, r *doctor.Report) error {
	// The client reports the members only as events, the first ones while
	// it connects: listen from the start.
	var (
		mu      sync.Mutex
		members = map[types.UUID]cluster.MemberInfo{}
	)
	listen := func(cfg *hazelcast.Config) {
		cfg.AddMembershipListener(func(e cluster.MembershipStateChanged) {
			mu.Lock()
			defer mu.Unlock()
			if e.State == cluster.MembershipStateAdded {
				members[e.Member.UUID] = e.Member
			} else {
				delete(members, e.Member.UUID)
			}
		})
	}
	connectCtx, cancel := req.Connecting(ctx)
	defer cancel()
	d, err := urlparams.Connect(connectCtx, req.URL, urlparams.Parsed(parseURL, func(ctx context.Context, u *url.URL, cfg hazelcast.Config, o options, timeout time.Duration) (driver.Driver, error) {
		return startWith(ctx, u, cfg, o, timeout, listen)
	}))
	if err != nil {
		return err
	}
	defer d.Close()
	r.Ran(checkMembers)
	mu.Lock()
	n := len(members)
	for _, m := range members {
		r.Fact("member", "%s, Hazelcast %v", m.Address, m.Version)
	}
	mu.Unlock()
	if n >= 3 {
		return nil
	}
	r.Hazard(doctor.Finding{
		Check:  checkMembers,
		Hazard: fmt.Sprintf("the cluster has %d member(s)", n),
		Why:    "locks live in the members' memory only: with one member its restart forgets every lock, and with two, split-brain protection (a quorum) cannot keep either side granting once one member is lost; even 3 members do not make map locks safe across a partition (fence writes with lease.Token())",
		Fix:    "run 3 or more members on separate hosts, with backups for dlock's maps",
	})
	return nil
}
