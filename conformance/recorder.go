package conformance

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/dlock-go/dlock/conformance/results"
	"github.com/dlock-go/dlock/driver"
)

// This file is how Run keeps a record of what it established
// (results.Env), for the project's generated capability table.

// recordCapabilities turns c into data.
func recordCapabilities(c driver.Capabilities) results.Capabilities {
	return results.Capabilities{
		Shared:        c.Shared,
		Reentrant:     c.Reentrant,
		Blocking:      c.Blocking,
		TokenBlock:    c.TokenBlock,
		MinTTL:        c.MinTTL.String(),
		MaxTTL:        c.MaxTTL.String(),
		TTLReason:     c.TTLReason,
		CheckKey:      c.CheckKey != nil,
		Notifier:      c.Notifier != nil,
		BatchExtender: c.BatchExtender != nil,
		Transferer:    c.Transferer != nil,
		Inspector:     c.Inspector != nil,
		Values:        c.Values,
		AnyAcquirer:   c.AnyAcquirer != nil,
	}
}

func recordHooks(h Harness) results.Hooks {
	r := results.Hooks{Tamper: h.Tamper != nil, Link: h.NewLinkedDriver != nil, ClientsServedInOrder: h.ClientsServedInOrder}
	if h.Faults != nil {
		r.Pause = h.Faults.Pause != nil && h.Faults.Resume != nil
		r.Restart = h.Faults.Restart != nil
	}
	return r
}

// recorder collects the outcomes of one Run's cases.
type recorder struct {
	mu      sync.Mutex
	results map[string]result // by case name; absent when the case did not run
}

func (r *recorder) add(name string, res result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.results == nil {
		r.results = make(map[string]result, len(cases))
	}
	r.results[name] = res
}

// record makes the record of a Run, or says why there is none: a case that
// failed or did not run (a -run pattern left it out).
func (r *recorder) record(name, pkg string, caps driver.Capabilities, h Harness) (results.Backend, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := results.Backend{Name: name, Package: pkg, Capabilities: recordCapabilities(caps), Hooks: recordHooks(h)}
	var missing []string
	for _, c := range cases {
		res, ok := r.results[c.name]
		switch {
		case !ok:
			missing = append(missing, c.name)
		case res.failed:
			return results.Backend{}, fmt.Errorf("case %s failed", c.name)
		case res.skipped != "":
			rec.Cases = append(rec.Cases, results.Case{Name: c.name, Outcome: results.Skipped, Reason: res.skipped})
		default:
			rec.Cases = append(rec.Cases, results.Case{Name: c.name, Outcome: results.Passed})
		}
	}
	if len(missing) > 0 {
		return results.Backend{}, fmt.Errorf("%d of the suite's %d cases did not run (%s)", len(missing), len(cases), strings.Join(missing, ", "))
	}
	return rec, nil
}

// recordName is h.Name, or else a name derived from what identifies the
// harness in a test binary: the last element of the driver's package path,
// then the test's name with its "Test" prefix and every "Conformance"
// element taken out (TestConformance gives "redis", TestRedLock/Conformance
// "redis/RedLock", TestConformance/TokenBlocks "memory/TokenBlocks").
func recordName(h Harness, testName, pkg string) string {
	if h.Name != "" {
		return h.Name
	}
	parts := []string{strings.TrimSuffix(path.Base(pkg), "_test")}
	for i, p := range strings.Split(testName, "/") {
		if i == 0 {
			p = strings.TrimPrefix(p, "Test")
		}
		if p != "" && p != "Conformance" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, "/")
}

// driverPackage is the import path of d's concrete type's package.
func driverPackage(d driver.Driver) string {
	t := reflect.TypeOf(d)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return ""
	}
	return t.PkgPath()
}

// writeRecord writes rec into dir, replacing a record of the same name
// whole (through a temporary file and a rename), so that a reader never
// sees half a record.
func writeRecord(dir string, rec results.Backend) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("%s=%q: want an absolute path (each package's tests run in their own directory)", results.Env, dir)
	}
	b, err := results.Marshal(rec)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".record-*")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	err = errors.Join(err, f.Close())
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(dir, results.FileName(rec.Name)))
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
	return err
}

// finishRecord writes the Run's record when results.Env asks for one. A run
// that failed or left cases out writes none, and says so in the test log;
// a record that cannot be written fails the test.
func finishRecord(t *testing.T, h Harness, probe driver.Driver, caps driver.Capabilities, r *recorder) {
	t.Helper()
	dir := os.Getenv(results.Env)
	if dir == "" {
		return
	}
	pkg := driverPackage(probe)
	name := recordName(h, t.Name(), pkg)
	if t.Failed() {
		t.Logf("conformance: no record for %s: the run failed", name)
		return
	}
	rec, err := r.record(name, pkg, caps, h)
	if err != nil {
		t.Logf("conformance: no record for %s: %v", name, err)
		return
	}
	if err := writeRecord(dir, rec); err != nil {
		t.Errorf("conformance: record for %s: %v (Harness.Name names it)", name, err)
	}
}
