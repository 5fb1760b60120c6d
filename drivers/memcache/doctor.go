package memcache

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dlock-go/dlock/doctor"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/urlparams"
)

// The checks `dlock doctor` runs on memcached servers, by name.
const (
	checkEviction = "memcached.eviction"
	checkMemory   = "memcached.memory"
	checkCAS      = "memcached.cas"
)

// fullShare is the share of its memory limit at which a server's memory
// counts as nearly full: items past it are soon refused or evicted.
const fullShare = 0.9

func init() {
	doctor.Register(Scheme, diagnose)
	doctor.Register(SchemeAlias, diagnose)
}

// diagnose is the doctor of the memcached schemes: it connects as
// dlock.Open does, then asks every server of the URL for its settings and
// statistics (gomemcache has no stats command, so over a connection of its
// own).
func diagnose(ctx context.Context, req doctor.Request, r *doctor.Report) error {
	var servers []string
	connectCtx, cancel := req.Connecting(ctx)
	defer cancel()
	d, err := urlparams.Connect(connectCtx, req.URL, func(ctx context.Context, u *url.URL, timeout time.Duration) (driver.Driver, error) {
		cfg, err := parseURL(u)
		if err != nil {
			return nil, err
		}
		servers = cfg.servers
		return connect(ctx, u, timeout)
	})
	if err != nil {
		return err
	}
	_ = d.Close()
	for _, addr := range servers {
		if err := diagnoseServer(ctx, addr, len(servers) > 1, r); err != nil {
			return err
		}
	}
	return nil
}

// diagnoseServer examines the server at addr (named in the findings when
// the URL has several).
func diagnoseServer(ctx context.Context, addr string, name bool, r *doctor.Report) error {
	on := ""
	if name {
		on = " on " + addr
	}
	settings, err := serverStats(ctx, addr, "settings")
	if err != nil {
		return err
	}
	general, err := serverStats(ctx, addr, "")
	if err != nil {
		return err
	}
	r.Fact("version"+on, "memcached %s", general["version"])

	r.Ran(checkEviction)
	if settings["evictions"] == "on" {
		r.Hazard(doctor.Finding{
			Check:  checkEviction,
			Hazard: "evictions are on" + on,
			Why:    "when memory runs short memcached evicts items it picks, lock items included: a held lock vanishes before its TTL and a second client gets it",
			Fix:    "start memcached with -M (--disable-evictions), so that a full server refuses new locks instead, and give locks a memcached of their own",
		})
	}

	r.Ran(checkMemory)
	slabs, err := serverStats(ctx, addr, "slabs")
	if err != nil {
		return err
	}
	limit, _ := strconv.ParseFloat(general["limit_maxbytes"], 64)
	if free := freeMemory(slabs, limit); limit > 0 && free < (1-fullShare)*limit {
		r.Hazard(doctor.Finding{
			Check:  checkMemory,
			Hazard: fmt.Sprintf("memory is nearly full%s: %.0f of %.0f bytes free (%.0f%%)", on, free, limit, 100*free/limit),
			Why:    "a full server evicts items, lock items included, or with -M refuses new ones: locks are lost, or cannot be taken",
			Fix:    "raise the memory limit (-m), or move other data off the locks' memcached",
		})
	}

	r.Ran(checkCAS)
	if problem := casProblem(general["version"], settings["cas_enabled"]); problem != "" {
		r.Hazard(doctor.Finding{
			Check:  checkCAS,
			Hazard: problem + on,
			Why:    "the driver releases and renews a lock only by a compare-and-set on the item it wrote: without CAS it cannot tell its own lock from another holder's",
			Fix:    "run memcached 1.4 or later without -C (--disable-cas)",
		})
	}
	return nil
}

// freeMemory returns the bytes a server whose memory limit is limit can
// still store items in, from its "stats slabs": what it has not allocated
// to slabs yet, and the free chunks of the slabs it has. Items' own bytes
// ("bytes" of "stats") understate it: a full server's chunks hold them
// with the slack of their size class.
func freeMemory(slabs map[string]string, limit float64) float64 {
	malloced, _ := strconv.ParseFloat(slabs["total_malloced"], 64)
	free := limit - malloced
	for name, v := range slabs {
		class, field, ok := strings.Cut(name, ":")
		if !ok || field != "free_chunks" && field != "free_chunks_end" {
			continue
		}
		n, _ := strconv.ParseFloat(v, 64)
		size, _ := strconv.ParseFloat(slabs[class+":chunk_size"], 64)
		free += n * size
	}
	return max(free, 0)
}

// casProblem says why a server of version with cas_enabled (its stats
// settings value) cannot do compare-and-set, or "" when it can. CAS came
// in memcached 1.2.4; -C turns it off.
func casProblem(version, casEnabled string) string {
	if casEnabled == "no" {
		return "CAS is disabled (-C)"
	}
	var major, minor, patch int
	if n, _ := fmt.Sscanf(version, "%d.%d.%d", &major, &minor, &patch); n >= 2 {
		if major < 1 || major == 1 && (minor < 2 || minor == 2 && patch < 4) {
			return fmt.Sprintf("memcached %s has no CAS (it came in 1.2.4)", version)
		}
	}
	return ""
}

// serverStats sends "stats which" (general statistics when which is empty) to
// the server at addr and returns its STAT lines by name.
func serverStats(ctx context.Context, addr, which string) (map[string]string, error) {
	var dialer net.Dialer
	c, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("memcached: %s: %w", addr, err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	cmd := strings.TrimSpace("stats " + which)
	if _, err := fmt.Fprintf(c, "%s\r\n", cmd); err != nil {
		return nil, fmt.Errorf("memcached: %s: %s: %w", addr, cmd, err)
	}
	m := map[string]string{}
	rd := bufio.NewReader(c)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return nil, fmt.Errorf("memcached: %s: %s: %w", addr, cmd, err)
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "END" {
			return m, nil
		}
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "STAT" {
			return nil, fmt.Errorf("memcached: %s: %s: unexpected %q", addr, cmd, line)
		}
		m[f[1]] = strings.Join(f[2:], " ")
	}
}
