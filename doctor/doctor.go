// Package doctor examines a live lock backend for the hazards that break
// locks in production: a Redis that may evict lock keys or forget them on
// restart, a memcached that evicts, a PostgreSQL behind a transaction-mode
// pooler, a ZooKeeper that clamps the session timeout, and so on. It is
// what `dlock doctor` runs.
//
// Each driver package registers the checks of its URL schemes with
// [Register] from init, beside its dlock.Register, so that importing the
// driver is all a program needs; [Run] finds them by the URL's scheme.
//
// The checks live here, registered per scheme, and not in package driver
// as one more optional interface of a Driver: they are an operator's tool,
// run once against a deployment, not part of locking. Keeping them out of
// the lock contract keeps that contract small (a driver author proves a
// driver with the conformance suite alone, and a driver without checks
// loses nothing), lets a check use what the lock path never needs (server
// configuration, statistics, a second connection), and keeps the dlock
// command free of the backends' client libraries: it imports the drivers
// for their side effects, as it does for dlock.Open, and asks this package.
package doctor

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/schemes"
)

// ErrNoChecks is returned by [Run] for a URL whose scheme has no registered
// checks (a backend the doctor cannot examine, such as the in-process one).
var ErrNoChecks = errors.New("doctor: no checks for this backend")

// Finding is one hazard found in a deployment: what was seen, why it
// breaks locks, and how to fix it.
type Finding struct {
	// Check names the check that found it, stable for scripts, e.g.
	// "redis.maxmemory-policy".
	Check string `json:"check"`
	// Hazard says what was seen, e.g. "maxmemory-policy is allkeys-lru".
	Hazard string `json:"hazard"`
	// Why says what it does to locks.
	Why string `json:"why"`
	// Fix says how to remove it.
	Fix string `json:"fix"`
}

// Fact is something a check learned that is no hazard by itself but helps
// to read the report, e.g. the server's version.
type Fact struct {
	// Name is the fact's name, e.g. "version".
	Name string `json:"name"`
	// Value is what was found.
	Value string `json:"value"`
}

// Skipped is a check that could not run, e.g. because the server refused
// the command to the URL's user: the report is clean of what it would
// have found only as far as the other checks go.
type Skipped struct {
	// Check names the check, as in [Finding.Check].
	Check string `json:"check"`
	// Reason says why it could not run.
	Reason string `json:"reason"`
}

// Report is what [Run] found.
type Report struct {
	// Backend is the URL's scheme.
	Backend string `json:"backend"`
	// Checks names every check that ran, found something or not.
	Checks []string `json:"checks"`
	// Facts are what the checks learned on the way.
	Facts []Fact `json:"facts"`
	// Findings are the hazards found; none when the deployment is clean.
	Findings []Finding `json:"findings"`
	// Skipped are the checks that could not run.
	Skipped []Skipped `json:"skipped"`

	mu sync.Mutex
}

// Clean reports whether no hazard was found.
func (r *Report) Clean() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.Findings) == 0
}

// Ran records that the check named check ran. A check that finds a
// hazard or skips is recorded by [Report.Hazard] or [Report.Skip] as well.
func (r *Report) Ran(check string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !slices.Contains(r.Checks, check) {
		r.Checks = append(r.Checks, check)
	}
}

// Hazard records a finding.
func (r *Report) Hazard(f Finding) {
	r.Ran(f.Check)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Findings = append(r.Findings, f)
}

// Fact records a fact.
func (r *Report) Fact(name, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Facts = append(r.Facts, Fact{Name: name, Value: fmt.Sprintf(format, args...)})
}

// Skip records that check could not run, and why.
func (r *Report) Skip(check string, why error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Skipped = append(r.Skipped, Skipped{Check: check, Reason: why.Error()})
}

// Has reports whether a finding of check is in the report.
func (r *Report) Has(check string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.Findings, func(f Finding) bool { return f.Check == check })
}

// Request is what a check is asked to examine.
type Request struct {
	// URL is the backend's URL, as dlock.Open takes it.
	URL *url.URL
	// TTL is the lock TTL the deployment uses, which some settings must
	// exceed (idle timeouts, session timeouts); dlock.DefaultTTL when the
	// caller did not say.
	TTL time.Duration
	// ConnectTimeout bounds connecting; dlock.DefaultConnectTimeout when
	// the caller did not say. See [Request.Connecting].
	ConnectTimeout time.Duration
}

// Connecting returns ctx bounded by the connect timeout, for the check's
// dlock.Open or driver open: the checks themselves run under ctx.
func (req Request) Connecting(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, req.ConnectTimeout)
}

// Options are [Run]'s settings; the zero value is dlock's defaults.
type Options struct {
	// TTL is the lock TTL the deployment uses (0: dlock.DefaultTTL).
	TTL time.Duration
	// ConnectTimeout bounds connecting to the backend (0:
	// dlock.DefaultConnectTimeout); the URL's connect_timeout parameter,
	// when it is shorter, wins.
	ConnectTimeout time.Duration
}

// CheckFunc examines the backend req.URL names and records what it finds
// in r. It connects as dlock.Open would (the URL's connect_timeout and the
// default connect timeout apply), returns an error wrapping
// dlock.ErrUnavailable when it cannot, and dlock.ErrInvalidURL when the
// URL is wrong; a check that cannot run for another reason (a command the
// server refuses) is recorded with [Report.Skip] instead. It must return
// when ctx ends and leave nothing behind on the backend.
type CheckFunc func(ctx context.Context, req Request, r *Report) error

// checks are the drivers' registrations for Run.
var checks = schemes.New[CheckFunc]("doctor")

// Register makes check the doctor of a URL scheme. Drivers call it from
// init, beside dlock.Register. It panics when check is nil or the scheme
// already has one, as two packages claiming one scheme is a programming
// error.
func Register(scheme string, check CheckFunc) {
	if check == nil {
		panic("doctor: Register of a nil CheckFunc for scheme " + scheme)
	}
	checks.Register(scheme, check)
}

// Schemes returns the URL schemes that have checks, sorted.
func Schemes() []string { return checks.Schemes() }

// Run examines the backend rawURL names (a URL as dlock.Open takes it),
// for locks of the TTL o gives. Its errors wrap
// dlock.ErrInvalidURL when the URL is wrong, [ErrNoChecks] when its scheme
// has no checks, and dlock.ErrUnavailable when the backend could not be
// reached; a Report with findings is no error.
func Run(ctx context.Context, rawURL string, o Options) (*Report, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Error quotes the whole URL, password included: say only why.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return nil, fmt.Errorf("%w: %w", dlock.ErrInvalidURL, err)
	}
	if u.Scheme == "" {
		return nil, fmt.Errorf("%w: %s has no scheme", dlock.ErrInvalidURL, u.Redacted())
	}
	scheme := strings.ToLower(u.Scheme)
	check, ok := checks.Lookup(scheme)
	if !ok {
		return nil, fmt.Errorf("%w: %s:// (schemes with checks: %s)", ErrNoChecks, scheme, strings.Join(Schemes(), ", "))
	}
	req := Request{URL: u, TTL: o.TTL, ConnectTimeout: o.ConnectTimeout}
	if req.TTL <= 0 {
		req.TTL = dlock.DefaultTTL
	}
	if req.ConnectTimeout <= 0 {
		req.ConnectTimeout = dlock.DefaultConnectTimeout
	}
	r := &Report{Backend: scheme, Checks: []string{}, Facts: []Fact{}, Findings: []Finding{}, Skipped: []Skipped{}}
	if err := check(ctx, req, r); err != nil {
		for _, typed := range []error{dlock.ErrInvalidURL, dlock.ErrInvalidOption, dlock.ErrInvalidTTL, dlock.ErrUnavailable} {
			if errors.Is(err, typed) {
				return nil, err
			}
		}
		return nil, fmt.Errorf("%w: %s: %w", dlock.ErrUnavailable, scheme, err)
	}
	return r, nil
}
