package zookeeper

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/doctor"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/urlparams"
)

// The checks `dlock doctor` runs on a ZooKeeper ensemble, by name.
const (
	checkSession  = "zookeeper.session-timeout"
	checkTTL      = "zookeeper.ttl"
	checkEnsemble = "zookeeper.ensemble"
)

// srvrTimeout bounds each server's answer to the four-letter word srvr.
const srvrTimeout = 2 * time.Second

func init() { doctor.Register(Scheme, diagnose) }

// diagnose is the doctor of the zk scheme: it opens a session as
// dlock.Open does, compares the session timeout the server granted with
// the one asked for and with the TTL, and looks at the ensemble.
func diagnose(ctx context.Context, req doctor.Request, r *doctor.Report) error {
	var (
		servers   []string
		requested time.Duration
	)
	connectCtx, cancel := req.Connecting(ctx)
	defer cancel()
	dd, err := urlparams.Connect(connectCtx, req.URL, func(ctx context.Context, u *url.URL, timeout time.Duration) (driver.Driver, error) {
		s, opts, err := parseURL(u)
		if err != nil {
			return nil, err
		}
		o := defaultOptions()
		if err := o.apply(opts); err != nil {
			return nil, err
		}
		servers, requested = s, o.sessionTTL
		return connect(ctx, u, s, opts, timeout)
	})
	if err != nil {
		return err
	}
	d := dd.(*Driver)
	defer d.Close()
	granted := d.SessionTTL()
	r.Fact("session timeout", "%v granted, %v asked for", granted, requested)

	r.Ran(checkSession)
	if granted != requested {
		bound, effect := "minSessionTimeout", "a crashed holder keeps its locks that much longer, and TTLs below it are refused"
		if granted < requested {
			bound, effect = "maxSessionTimeout", "TTLs above twice the granted timeout are refused, and leases are valid only that long after each renewal"
		}
		r.Hazard(doctor.Finding{
			Check:  checkSession,
			Hazard: fmt.Sprintf("the server granted a session timeout of %v for the %v asked (its %s)", granted, requested, bound),
			Why:    "the session timeout is how long ZooKeeper keeps a silent client's locks, and the driver bounds lock TTLs by it: " + effect,
			Fix:    fmt.Sprintf("ask for a session_ttl within the servers' minSessionTimeout and maxSessionTimeout (2 to 20 ticks by default), or set those bounds around %v", requested),
		})
	}
	r.Ran(checkTTL)
	if req.TTL < granted || req.TTL > 2*granted {
		r.Hazard(doctor.Finding{
			Check:  checkTTL,
			Hazard: fmt.Sprintf("the TTL %v is outside %v to %v, one to two session timeouts", req.TTL, granted, 2*granted),
			Why:    "a crashed holder keeps its lock for the session timeout, and a lease lasts one session timeout after its last renewal: the driver refuses such a TTL (ErrInvalidTTL), so no lock of it can be taken",
			Fix:    "set the TTL (ttl: in the configuration, dlock.WithTTL) or session_ttl= so that session_ttl ≤ TTL ≤ 2 × session_ttl",
		})
	}
	return diagnoseEnsemble(ctx, d.conn, servers, r)
}

// diagnoseEnsemble reports a standalone server or an ensemble that
// tolerates no failure. Members come from /zookeeper/config, modes from
// the four-letter word srvr (which a server may not allow: its
// 4lw.commands.whitelist).
func diagnoseEnsemble(ctx context.Context, conn *zk.Conn, servers []string, r *doctor.Report) error {
	r.Ran(checkEnsemble)
	members := 0
	data, _, err := conn.Get("/zookeeper/config")
	if err == nil {
		for line := range strings.Lines(string(data)) {
			if strings.HasPrefix(line, "server.") && !strings.Contains(line, ":observer") {
				members++
			}
		}
	}
	var modes []string
	for _, addr := range servers {
		mode, err := serverMode(ctx, addr)
		if err != nil {
			continue
		}
		modes = append(modes, addr+" "+mode)
		if mode == "standalone" {
			members = max(members, 1)
		}
	}
	if len(modes) > 0 {
		r.Fact("servers", "%s", strings.Join(modes, ", "))
	}
	switch {
	case members == 0:
		r.Skip(checkEnsemble, fmt.Errorf("neither /zookeeper/config nor srvr (4lw.commands.whitelist) names the members"))
	case members < 3:
		what := "the server is standalone"
		if members > 1 {
			what = fmt.Sprintf("the ensemble has %d members", members)
		}
		r.Hazard(doctor.Finding{
			Check:  checkEnsemble,
			Hazard: what,
			Why:    "with fewer than 3 members no server may fail: one down and no lock can be taken, renewed or released until it is back, and every lease runs out",
			Fix:    "run an ensemble of 3 (or 5) members on separate hosts and list them all in the URL",
		})
	default:
		r.Fact("ensemble", "%d voting members", members)
	}
	return nil
}

// serverMode asks the server at addr for its mode with the four-letter
// word srvr: "standalone", "leader", "follower" or "observer".
func serverMode(ctx context.Context, addr string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, srvrTimeout)
	defer cancel()
	var dialer net.Dialer
	c, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := io.WriteString(c, "srvr"); err != nil {
		return "", err
	}
	answer, err := io.ReadAll(c) // the server closes the connection after it
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(string(answer)) {
		if mode, ok := strings.CutPrefix(strings.TrimSpace(line), "Mode:"); ok {
			return strings.TrimSpace(mode), nil
		}
	}
	return "", fmt.Errorf("zookeeper: srvr %s: no mode in %q", addr, answer)
}
