package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/drivers/memory"
	"github.com/dlock-go/dlock/internal/benchkit"
)

// noPermits is the memory driver, except that acquiring a semaphore's
// permit fails: only the bench's semaphore step fails on it. It declares
// no AnyAcquirer, so that every permit goes through its Acquire.
type noPermits struct{ driver.Driver }

var errNoPermits = errors.New("permits refused for the test")

func (d noPermits) Capabilities() driver.Capabilities {
	caps := d.Driver.Capabilities()
	caps.AnyAcquirer = nil
	return caps
}

func (d noPermits) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	if strings.Contains(req.Key, "/permit/") {
		return nil, errNoPermits
	}
	return d.Driver.Acquire(ctx, req)
}

// noPermitsScheme opens noPermits over one in-process backend.
const noPermitsScheme = "mem-nopermits"

func init() {
	b := memory.NewBackend()
	dlock.Register(noPermitsScheme, func(context.Context, *url.URL) (driver.Driver, error) {
		return noPermits{memory.New(b)}, nil
	})
}

// A step that fails shows as failed, with its error, beside the figures of
// the backend's other steps, in the table and in results.json; bench then
// exits non-zero.
func TestBenchStepFails(t *testing.T) {
	out := t.TempDir()
	code, stdout, stderr := runWithin(t, "bench", "--quick", "--url", noPermitsScheme+"://x", "--out", out)
	if code != exitSoftware {
		t.Errorf("exit %d, want %d (a step failed)\nstderr: %s", code, exitSoftware, stderr)
	}
	if !strings.Contains(stderr, "semaphore failed: ") || !strings.Contains(stderr, "1 step(s) failed") {
		t.Errorf("stderr does not tell of the failed step:\n%s", stderr)
	}
	var row string
	for line := range strings.Lines(stdout) {
		if strings.HasPrefix(strings.TrimSpace(line), noPermitsScheme) {
			row = line
		}
	}
	if strings.Count(row, "failed") != 2 { // the semaphore's two columns
		t.Errorf("table row %q: want the semaphore's two cells failed, the others measured\n%s", row, stdout)
	}
	if want := "failed " + noPermitsScheme + ": semaphore: "; !strings.Contains(stdout, want) || !strings.Contains(stdout, errNoPermits.Error()) {
		t.Errorf("stdout lacks %q with the error:\n%s", want, stdout)
	}

	var res results
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(out, "results.json"))), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Reports) != 1 {
		t.Fatalf("results.json: %d reports, want the backend's", len(res.Reports))
	}
	r := res.Reports[0]
	if len(r.Failed) != 1 || r.Failed[0].Step != benchkit.StepSemaphore || !strings.Contains(r.Failed[0].Error, errNoPermits.Error()) {
		t.Errorf("results.json: failed steps %+v, want the semaphore's with its error", r.Failed)
	}
	if r.Semaphore != nil {
		t.Errorf("results.json: semaphore figures %+v from a failed step", r.Semaphore)
	}
	if r.Uncontended.Lock.N == 0 || len(r.Handoff) != 3 || len(r.Contended) != 2 || r.Failover == nil || r.Held.Locks == 0 {
		t.Errorf("results.json: the steps that did not fail lack figures: %+v", r)
	}
}
