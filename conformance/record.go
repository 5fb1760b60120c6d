package conformance

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/dlock-go/dlock/driver"
)

// RecordEnv names the environment variable that makes Run keep a record of
// what it found: when it names a directory (an absolute path, since each
// package's tests run in their own directory), every Run that ran all of
// the suite's cases and passed writes Record as JSON to a file of its own
// there, named after Record.Name. The project checks its drivers' records in
// (docs/conformance) and generates the README's capability table from them;
// its CI compares each run's records with those, so that the table cannot
// go stale.
const RecordEnv = "DLOCK_CONFORMANCE_RECORD"

// Record is what one Run established about a backend: its driver's
// capabilities, the hooks its harness gave the suite, and how each case
// ended. It holds only facts that are the same on every passing run (no
// timings, no counts), so that two runs' records can be compared byte for
// byte.
type Record struct {
	// Name is the harness's: Harness.Name, or the one Run derived.
	Name string `json:"name"`
	// Package is the import path of the driver's package (of the concrete
	// type NewDriver returned).
	Package      string               `json:"package"`
	Capabilities RecordedCapabilities `json:"capabilities"`
	Hooks        RecordedHooks        `json:"hooks"`
	// Cases are the suite's cases in the order the suite lists them.
	Cases []RecordedCase `json:"cases"`
}

// RecordedCapabilities is driver.Capabilities as data: its facts as they
// are, and whether each optional behaviour (a function or an interface) is
// present.
type RecordedCapabilities struct {
	Shared     bool   `json:"shared"`
	Reentrant  bool   `json:"reentrant"`
	Blocking   bool   `json:"blocking"`
	TokenBlock uint64 `json:"token_block"`
	// MinTTL and MaxTTL are the declared limits in Go's duration syntax
	// ("5s"), "0s" when the core's own limit applies.
	MinTTL        string `json:"min_ttl"`
	MaxTTL        string `json:"max_ttl"`
	TTLReason     string `json:"ttl_reason,omitempty"`
	CheckKey      bool   `json:"check_key"`
	Notifier      bool   `json:"notifier"`
	BatchExtender bool   `json:"batch_extender"`
	Transferer    bool   `json:"transferer"`
	Inspector     bool   `json:"inspector"`
}

// recordCapabilities turns c into data.
func recordCapabilities(c driver.Capabilities) RecordedCapabilities {
	return RecordedCapabilities{
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
	}
}

// RecordedHooks says which of the harness's optional hooks were given, and
// so which fault cases could run.
type RecordedHooks struct {
	Tamper  bool `json:"tamper"`  // Harness.Tamper
	Pause   bool `json:"pause"`   // Faults.Pause and Faults.Resume
	Restart bool `json:"restart"` // Faults.Restart
	Link    bool `json:"link"`    // Harness.NewLinkedDriver
}

func recordHooks(h Harness) RecordedHooks {
	r := RecordedHooks{Tamper: h.Tamper != nil, Link: h.NewLinkedDriver != nil}
	if h.Faults != nil {
		r.Pause = h.Faults.Pause != nil && h.Faults.Resume != nil
		r.Restart = h.Faults.Restart != nil
	}
	return r
}

// RecordedCase is how one case ended in a passing run.
type RecordedCase struct {
	Name string `json:"name"`
	// Outcome is OutcomePassed or OutcomeSkipped.
	Outcome string `json:"outcome"`
	// Reason is why the case was skipped (a missing capability or hook).
	Reason string `json:"reason,omitempty"`
}

// The outcomes of a RecordedCase.
const (
	OutcomePassed  = "passed"
	OutcomeSkipped = "skipped"
)

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

// record makes the Record of a Run, or says why there is none: a case that
// failed or did not run (a -run pattern left it out).
func (r *recorder) record(name, pkg string, caps driver.Capabilities, h Harness) (Record, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := Record{Name: name, Package: pkg, Capabilities: recordCapabilities(caps), Hooks: recordHooks(h)}
	var missing []string
	for _, c := range cases {
		res, ok := r.results[c.name]
		switch {
		case !ok:
			missing = append(missing, c.name)
		case res.failed:
			return Record{}, fmt.Errorf("case %s failed", c.name)
		case res.skipped != "":
			rec.Cases = append(rec.Cases, RecordedCase{Name: c.name, Outcome: OutcomeSkipped, Reason: res.skipped})
		default:
			rec.Cases = append(rec.Cases, RecordedCase{Name: c.name, Outcome: OutcomePassed})
		}
	}
	if len(missing) > 0 {
		return Record{}, fmt.Errorf("%d of the suite's %d cases did not run (%s)", len(missing), len(cases), strings.Join(missing, ", "))
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

// validRecordName is what a Record's name may be: path elements of
// letters, digits, '.', '_' and '-', which make a portable file name.
var validRecordName = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9._-]*(/[A-Za-z0-9_-][A-Za-z0-9._-]*)*$`)

// RecordFile is the name of the file a Record named name is written to:
// the name with each '/' made a '.', and ".json".
func RecordFile(name string) string {
	return strings.ReplaceAll(name, "/", ".") + ".json"
}

// MarshalRecord encodes rec as the suite writes it: indented JSON ending
// in a newline, so that records diff well under version control.
func MarshalRecord(rec Record) ([]byte, error) {
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// writeRecord writes rec into dir, replacing a record of the same name
// whole (through a temporary file and a rename), so that a reader never
// sees half a record.
func writeRecord(dir string, rec Record) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("%s=%q: want an absolute path (each package's tests run in their own directory)", RecordEnv, dir)
	}
	if !validRecordName.MatchString(rec.Name) {
		return fmt.Errorf("record name %q: want path elements of letters, digits, '.', '_' and '-' (set Harness.Name)", rec.Name)
	}
	b, err := MarshalRecord(rec)
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
		err = os.Rename(f.Name(), filepath.Join(dir, RecordFile(rec.Name)))
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
	return err
}

// finishRecord writes the Run's record when RecordEnv asks for one. A run
// that failed or left cases out writes none, and says so in the test log;
// a record that cannot be written fails the test.
func finishRecord(t *testing.T, h Harness, probe driver.Driver, caps driver.Capabilities, r *recorder) {
	t.Helper()
	dir := os.Getenv(RecordEnv)
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
		t.Errorf("conformance: record for %s: %v", name, err)
	}
}
