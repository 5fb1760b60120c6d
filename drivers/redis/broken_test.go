package redis

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock/conformance"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// The seeds' broken Redis patterns (../shared/reference/README.md), each as a
// variant of this driver with one operation replaced by the broken
// algorithm's real Redis commands, must fail the conformance case written
// to catch it. conformance.Run reports to a *testing.T, and a failing
// subtest fails its parent, so each variant runs the suite in a child
// process (this test binary, against the same server) and the parent checks
// that the child failed the case, and failed it for the rule.

// envBroken names the variant TestBrokenVariant runs; unset, it skips.
const envBroken = "DLOCK_REDIS_BROKEN_VARIANT"

// brokenVariants are the variants, by name, with the case that catches each.
var brokenVariants = map[string]struct {
	caughtBy string
	wrap     func(d *Driver, client int64) driver.Driver
}{
	// 001: SETNX, then EXPIRE as a second command; a crash between the two
	// leaves a lock that never expires. Modelled as the EXPIRE never
	// arriving, while the lease reports the TTL the client meant to set.
	"setnx-then-expire": {"ExpiryAfterHolderVanishes", func(d *Driver, _ int64) driver.Driver {
		return &brokenDriver{d: d, acquire: func(ctx context.Context, req driver.Request) (driver.Lease, error) {
			forever := req
			forever.TTL = 24 * time.Hour // no EXPIRE
			l, err := d.Acquire(ctx, forever)
			if err != nil {
				return nil, err
			}
			return &meantTTL{Lease: l, ttl: req.TTL}, nil
		}}
	}},
	// 000/001: the expiry judged by the client's own clock and an "expired"
	// lock recovered by overwriting it (GET, then GETSET). The clients'
	// clocks disagree by up to a TTL, as unsynchronised clocks do.
	"getset-recovery": {"MutualExclusion", func(d *Driver, client int64) driver.Driver {
		skew := time.Duration(client%3) * time.Second / 2
		return &brokenDriver{d: d, acquire: func(ctx context.Context, req driver.Request) (driver.Lease, error) {
			l, err := d.Acquire(ctx, req)
			if !errors.Is(err, driver.ErrLocked) {
				return l, err
			}
			n := namesOf(d.prefix, req.Key)
			fields, herr := d.client.HGetAll(ctx, n.lock).Result() // GET
			if herr != nil {
				return nil, err
			}
			latest := int64(0)
			for f, v := range fields {
				if strings.HasPrefix(f, "h:") {
					exp, _, _ := strings.Cut(v, " ")
					e, _ := strconv.ParseInt(exp, 10, 64)
					latest = max(latest, e)
				}
			}
			if latest >= time.Now().Add(skew).UnixMilli() {
				return nil, err
			}
			_ = d.client.Del(ctx, n.lock).Err() // GETSET over what this clock calls expired
			return d.Acquire(ctx, req)
		}}
	}},
	// 001: DEL without an owner check.
	"del-without-owner-check": {"StaleUnlock", func(d *Driver, _ int64) driver.Driver {
		return &brokenDriver{d: d, release: func(ctx context.Context, l *lease) error {
			return d.client.Del(ctx, l.names.lock).Err()
		}}
	}},
	// 004: one `read` field shared by every reader: the first reader to
	// leave deletes it for all (HDEL lock read).
	"single-read-field": {"ReadersShare", func(d *Driver, _ int64) driver.Driver {
		return &brokenDriver{d: d, release: func(ctx context.Context, l *lease) error {
			fields, err := d.client.HKeys(ctx, l.names.lock).Result()
			if err != nil {
				return err
			}
			for _, f := range fields {
				if strings.HasPrefix(f, "h:") {
					_ = d.client.HDel(ctx, l.names.lock, f).Err()
				}
			}
			return nil
		}}
	}},
}

func TestBrokenVariantsFailConformance(t *testing.T) {
	server.Need(t)
	if os.Getenv(envBroken) != "" {
		t.Skip("in a child process")
	}
	for name, v := range brokenVariants {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out, err := runVariant(t, name, v.caughtBy)
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("child process: %v\n%s", err, out)
			}
			if !strings.Contains(out, "rule broken") || !strings.Contains(out, "--- FAIL: TestBrokenVariant/Cases/"+v.caughtBy) {
				t.Fatalf("the child failed, but not by %s's rule:\n%s", v.caughtBy, out)
			}
			t.Logf("caught by %s", v.caughtBy)
		})
	}
	// The control: the same child with the real driver passes the cases.
	t.Run("control", func(t *testing.T) {
		t.Parallel()
		var cases []string
		for _, v := range brokenVariants {
			cases = append(cases, v.caughtBy)
		}
		if out, err := runVariant(t, "none", strings.Join(cases, "|")); err != nil {
			t.Fatalf("the real driver failed the cases in a child process: %v\n%s", err, out)
		}
	})
}

// runVariant runs TestBrokenVariant for the named variant and cases in a
// child process, against this process's server, and returns its output.
func runVariant(t *testing.T, variant, cases string) (string, error) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestBrokenVariant$/^Cases$/^("+cases+")$", "-test.count=1", "-test.timeout=150s")
	cmd.Env = append(os.Environ(), envBroken+"="+variant, testserver.EnvRedisURL+"="+server.URL)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestBrokenVariant runs the conformance suite against the variant named by
// DLOCK_REDIS_BROKEN_VARIANT ("none": the real driver); only as a child of
// TestBrokenVariantsFailConformance.
func TestBrokenVariant(t *testing.T) {
	name := os.Getenv(envBroken)
	if name == "" {
		t.Skip("run by TestBrokenVariantsFailConformance")
	}
	v, ok := brokenVariants[name]
	if !ok && name != "none" {
		t.Fatalf("no variant %q", name)
	}
	var clients atomic.Int64
	conformance.Run(t, conformance.Harness{
		NewDriver: func(ctx context.Context) (driver.Driver, error) {
			d, err := open(ctx, testkit.URL(t, server.URL))
			if err != nil || name == "none" {
				return d, err
			}
			return v.wrap(d.(*Driver), clients.Add(1)), nil
		},
	})
}

// brokenDriver is the real driver with its acquisition or release replaced.
// It declares read-write and reentrant locks and the Notifier, but not the
// BatchExtender (whose leases must be the driver's own), the Inspector, the
// Transferer nor a TokenBlock, so the core renews lease by lease and hands
// locks over by release and acquisition.
type brokenDriver struct {
	d       *Driver
	acquire func(ctx context.Context, req driver.Request) (driver.Lease, error)
	release func(ctx context.Context, l *lease) error
}

func (b *brokenDriver) Capabilities() driver.Capabilities {
	return driver.Capabilities{Shared: true, Reentrant: true, Notifier: b.d}
}

func (b *brokenDriver) Close() error { return b.d.Close() }

func (b *brokenDriver) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	acquire := b.d.Acquire
	if b.acquire != nil {
		acquire = b.acquire
	}
	l, err := acquire(ctx, req)
	if err != nil || b.release == nil {
		return l, err
	}
	return &brokenRelease{Lease: l, l: l.(*lease), release: b.release}, nil
}

type brokenRelease struct {
	driver.Lease
	l       *lease
	release func(ctx context.Context, l *lease) error
}

func (r *brokenRelease) Release(ctx context.Context) error { return r.release(ctx, r.l) }

// meantTTL reports the TTL the client meant to set, not the one it did.
type meantTTL struct {
	driver.Lease
	ttl time.Duration
}

func (l *meantTTL) Validity() time.Duration { return l.ttl }
