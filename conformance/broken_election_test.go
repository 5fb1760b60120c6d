package conformance

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/drivers/memory"
)

// Deliberately broken drivers for the election cases, and the self-test
// that shows the cases catch them. Most of them get the value stored with a
// hold wrong (driver.Capabilities.Values): they are the memory driver
// behind plainDriver, declaring Values with an Inspector whose report, or
// whose storing of the value, is broken in one way. The others are
// broken drivers of the lock cases, which the election cases must catch
// too, since a leadership is a lease.

// valuesDriver declares Values over a plainDriver, with inspector as its
// Inspector.
type valuesDriver struct {
	*plainDriver
	inspector driver.Inspector
}

// Capabilities declares Values and the Inspector that reports them, and
// nothing else: the core polls, and learns of losses by renewal.
func (d *valuesDriver) Capabilities() driver.Capabilities {
	return driver.Capabilities{Values: true, Inspector: d.inspector}
}

// inspectorOf returns the memory driver's own Inspector under d.
func inspectorOf(d *plainDriver) driver.Inspector { return d.Driver.Capabilities().Inspector }

// rewritingInspector reports what rewrite makes of the memory driver's
// report of key.
type rewritingInspector struct {
	inner   driver.Inspector
	rewrite func(key string, info driver.Info) driver.Info
}

func (r rewritingInspector) Inspect(ctx context.Context, key string) (driver.Info, error) {
	info, err := r.inner.Inspect(ctx, key)
	if err != nil {
		return info, err
	}
	return r.rewrite(key, info), nil
}

// withInspector makes d a valuesDriver whose Inspector rewrites the memory
// driver's reports with rewrite.
func withInspector(d *plainDriver, rewrite func(key string, info driver.Info) driver.Info) driver.Driver {
	return &valuesDriver{plainDriver: d, inspector: rewritingInspector{inner: inspectorOf(d), rewrite: rewrite}}
}

// unbrokenValues is the control: the memory driver stores the value with
// the hold and reports it with the hold's token.
func unbrokenValues(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	return &valuesDriver{plainDriver: d, inspector: inspectorOf(d)}
}

// sideRecords stands for a record per key kept on the backend beside the
// lock (a second key, a hash field), written by separate commands; it is
// shared by every client of one harness, as the backend's keys would be.
type sideRecords struct {
	mu sync.Mutex
	m  map[string]sideRecord
}

type sideRecord struct {
	value, previous string
	token           uint64
}

func (s *sideRecords) get(key string) (sideRecord, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.m[key]
	return r, ok
}

func (s *sideRecords) update(key string, f func(r *sideRecord)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]sideRecord{}
	}
	r := s.m[key]
	f(&r)
	s.m[key] = r
}

// recordGrants makes d's Acquire call f with the key's side record after
// each grant, as a driver that writes the record with a second command
// would.
func recordGrants(d *plainDriver, side *sideRecords, f func(r *sideRecord, req driver.Request, l driver.Lease)) {
	d.acquire = func(ctx context.Context, d *plainDriver, req driver.Request) (driver.Lease, error) {
		l, err := d.Driver.Acquire(ctx, req)
		if err == nil {
			side.update(req.Key, func(r *sideRecord) { f(r, req, l) })
		}
		return l, err
	}
}

// newStaleValue makes the maker of drivers that keep the holder's value in
// a side record written one grant late (the new holder's write queued
// behind the lock's, and landing after the next reader): Inspect pairs the
// new holder's token with the previous holder's value.
func newStaleValue() func(*memory.Backend, *plainDriver, int64) driver.Driver {
	side := &sideRecords{}
	return func(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver {
		recordGrants(d, side, func(r *sideRecord, req driver.Request, _ driver.Lease) {
			r.previous, r.value = r.value, req.Value
		})
		return withInspector(d, func(key string, info driver.Info) driver.Info {
			if info.Held {
				r, _ := side.get(key)
				info.Value = r.previous
			}
			return info
		})
	}
}

// tokenOffByOne reports, beside the holder's value, the key's token
// counter, which holds the next token to issue rather than the holder's:
// an Inspect that reads the counter instead of the hold.
func tokenOffByOne(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	return withInspector(d, func(_ string, info driver.Info) driver.Info {
		if info.Held {
			info.Token++
		}
		return info
	})
}

// valuesIgnored declares Values and never stores Request.Value: a driver
// whose acquire script was not given the new argument.
func valuesIgnored(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	d.acquire = func(ctx context.Context, d *plainDriver, req driver.Request) (driver.Lease, error) {
		req.Value = ""
		return d.Driver.Acquire(ctx, req)
	}
	return &valuesDriver{plainDriver: d, inspector: inspectorOf(d)}
}

// newValueKeptAfterRelease makes the maker of drivers that keep the value
// and token of each grant in a side key without expiry, which neither
// Release nor the lock's expiry removes, and whose Inspect takes the side
// key's presence for a holder: a leader that resigned or vanished is
// reported as leading until the next one writes over it.
func newValueKeptAfterRelease() func(*memory.Backend, *plainDriver, int64) driver.Driver {
	side := &sideRecords{}
	return func(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver {
		recordGrants(d, side, func(r *sideRecord, req driver.Request, l driver.Lease) {
			r.value, r.token = req.Value, l.Token()
		})
		return withInspector(d, func(key string, info driver.Info) driver.Info {
			if r, ok := side.get(key); ok && !info.Held {
				info.Held, info.Mode, info.Holders, info.Value, info.Token = true, driver.Exclusive, 1, r.value, r.token
			}
			return info
		})
	}
}

// waitersInLine stands for a queue of waiting clients kept on the backend
// beside each lock (a list, a sorted set), shared by every client of one
// harness, as the backend's keys would be.
type waitersInLine struct {
	mu sync.Mutex
	m  map[string][]int64 // by key: client numbers, first in line first
}

// first reports whether client may take key now: nobody is in line, or it
// is first.
func (w *waitersInLine) first(key string, client int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	line := w.m[key]
	return len(line) == 0 || line[0] == client
}

// join puts client at the end of key's line, unless it is in it already.
func (w *waitersInLine) join(key string, client int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string][]int64{}
	}
	if !slices.Contains(w.m[key], client) {
		w.m[key] = append(w.m[key], client)
	}
}

// leave takes client out of key's line.
func (w *waitersInLine) leave(key string, client int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if line := slices.DeleteFunc(w.m[key], func(c int64) bool { return c == client }); len(line) > 0 {
		w.m[key] = line
	} else {
		delete(w.m, key)
	}
}

// newWaitersLeftInLine makes the maker of drivers that keep a line of
// waiting clients on the backend for fairness, and put a client in it when
// its request is refused, but take it out only when it is granted: never
// when its waiter gives up. A cancelled Lock (or Campaign) leaves its
// client first in line, and every other client is refused the free lock
// for as long as the entry lasts (here for ever; a real one might lapse
// after a while, still far too late).
func newWaitersLeftInLine() func(*memory.Backend, *plainDriver, int64) driver.Driver {
	line := &waitersInLine{}
	return func(_ *memory.Backend, d *plainDriver, client int64) driver.Driver {
		d.acquire = func(ctx context.Context, d *plainDriver, req driver.Request) (driver.Lease, error) {
			if !line.first(req.Key, client) {
				line.join(req.Key, client)
				return nil, driver.ErrLocked
			}
			l, err := d.Driver.Acquire(ctx, req)
			switch {
			case err == nil:
				line.leave(req.Key, client)
			case errors.Is(err, driver.ErrLocked):
				line.join(req.Key, client)
			}
			return l, err
		}
		return d
	}
}

// TestSuiteCatchesBrokenElections runs the election cases against the
// broken drivers above, and against lock-breaking drivers of the other
// self-tests that elections inherit; each must be caught, and its control
// must pass.
func TestSuiteCatchesBrokenElections(t *testing.T) {
	type maker = func(*memory.Backend, *plainDriver, int64) driver.Driver
	reports := []string{"ElectionLeaderReports", "ElectionObserve"}
	for _, tc := range []struct {
		name     string
		broken   func() maker
		control  maker
		linked   bool
		caughtBy []string
	}{
		{"value of the previous holder", newStaleValue, unbrokenValues, false, reports},
		{"token other than the holder's", func() maker { return tokenOffByOne }, unbrokenValues, false, reports},
		{"Values declared, Request.Value ignored", func() maker { return valuesIgnored }, unbrokenValues, false, reports},
		{"value kept after release and expiry", newValueKeptAfterRelease, unbrokenValues, false, reports},
		{"a cancelled waiter left in the backend's line", newWaitersLeftInLine, unbroken, false, []string{"ElectionCampaignCancelled"}},
		{"reused fencing tokens", func() maker { return reusedFencingTokens }, unbroken, false, []string{"ElectionOneLeader"}},
		{"renewal of unknown outcome taken as done", func() maker { return renewalAssumedOnTimeout }, unbroken, true, []string{"ElectionPartitionedLeaderLoses"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			harness := brokenHarness
			if tc.linked {
				harness = linkedHarness
			}
			expectCaught(t, harness(tc.broken()), harness(tc.control), tc.caughtBy...)
		})
	}
}

// TestElectionCasesSkip checks that the cases needing a capability or a
// hook skip, saying why, without it: a driver without Values, a harness
// without links.
func TestElectionCasesSkip(t *testing.T) {
	results, err := runNamed(brokenHarness(unbroken), "ElectionLeaderReports", "ElectionObserve", "ElectionPartitionedLeaderLoses")
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range results {
		want := "Capabilities.Values"
		if name == "ElectionPartitionedLeaderLoses" {
			want = "NewLinkedDriver"
		}
		if r.failed || !strings.Contains(r.skipped, want) {
			t.Errorf("case %s: failed %v, skipped %q; want skipped for want of %s", name, r.failed, r.skipped, want)
		}
	}
}
