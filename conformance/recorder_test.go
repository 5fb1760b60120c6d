package conformance

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/conformance/results"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/drivers/memory"
)

// Every field of driver.Capabilities is in the record, under its own name:
// a capability added to the contract cannot be left out of the generated
// table.
func TestRecordedCapabilitiesCoverEveryField(t *testing.T) {
	recorded := reflect.TypeFor[results.Capabilities]()
	caps := reflect.TypeFor[driver.Capabilities]()
	for i := range caps.NumField() {
		f := caps.Field(i)
		if _, ok := recorded.FieldByName(f.Name); !ok {
			t.Errorf("driver.Capabilities.%s is not in results.Capabilities", f.Name)
		}
	}
	if recorded.NumField() != caps.NumField() {
		t.Errorf("results.Capabilities has %d fields, driver.Capabilities %d", recorded.NumField(), caps.NumField())
	}
}

func TestRecordCapabilities(t *testing.T) {
	d := memory.New(memory.NewBackend(), memory.WithoutBlocking(), memory.WithTokenBlocks(8))
	defer d.Close()
	caps := d.Capabilities()
	caps.MinTTL, caps.MaxTTL, caps.TTLReason = 2*time.Second, 24*time.Hour, "why"
	caps.CheckKey = func(string) error { return nil }
	got := recordCapabilities(caps)
	want := results.Capabilities{Shared: true, Reentrant: true, TokenBlock: 8, MinTTL: "2s", MaxTTL: "24h0m0s", TTLReason: "why",
		CheckKey: true, Notifier: true, BatchExtender: true, Transferer: true, Inspector: true, Values: true, AnyAcquirer: true}
	if got != want {
		t.Errorf("recordCapabilities = %+v, want %+v", got, want)
	}
	if got := recordCapabilities(driver.Capabilities{}); got.MinTTL != "0s" || got.MaxTTL != "0s" || got.Notifier {
		t.Errorf("zero Capabilities recorded as %+v", got)
	}
}

func TestRecordName(t *testing.T) {
	for _, tc := range []struct {
		name, test, pkg, want string
	}{
		{"", "TestConformance", "github.com/dlock-go/dlock/drivers/redis", "redis"},
		{"", "TestRedLock/Conformance", "github.com/dlock-go/dlock/drivers/redis", "redis/RedLock"},
		{"", "TestConformance/TokenBlocks", "github.com/dlock-go/dlock/drivers/memory", "memory/TokenBlocks"},
		{"", "TestSuite", "example.com/mariadb_test", "mariadb/Suite"},
		{"mine", "TestConformance", "example.com/x", "mine"},
	} {
		if got := recordName(Harness{Name: tc.name}, tc.test, tc.pkg); got != tc.want {
			t.Errorf("recordName(%q, %q, %q) = %q, want %q", tc.name, tc.test, tc.pkg, got, tc.want)
		}
	}
	if got, want := driverPackage(memory.New(memory.NewBackend())), "github.com/dlock-go/dlock/drivers/memory"; got != want {
		t.Errorf("driverPackage = %q, want %q", got, want)
	}
}

// A run records only when every case ran and none failed.
func TestRecorderNeedsEveryCase(t *testing.T) {
	h := Harness{Tamper: func(context.Context, string, bool) error { return nil }, Faults: &Faults{Restart: func(context.Context) error { return nil }}, ClientsServedInOrder: true}
	var r recorder
	for _, c := range cases[1:] {
		r.add(c.name, result{skipped: map[bool]string{true: "no hook"}[c.name == "Transfer"]})
	}
	if _, err := r.record("x", "p", driver.Capabilities{}, h); err == nil || !strings.Contains(err.Error(), cases[0].name) {
		t.Errorf("a run without %s recorded (err %v)", cases[0].name, err)
	}
	r.add(cases[0].name, result{})
	rec, err := r.record("x", "p", driver.Capabilities{}, h)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Cases) != len(cases) || rec.Cases[0].Name != cases[0].name {
		t.Errorf("recorded cases %v, want the suite's %d in its order", rec.Cases, len(cases))
	}
	for _, c := range rec.Cases {
		if want := map[bool]string{true: results.Skipped, false: results.Passed}[c.Name == "Transfer"]; c.Outcome != want {
			t.Errorf("case %s recorded %q, want %q", c.Name, c.Outcome, want)
		}
	}
	if want := (results.Hooks{Tamper: true, Restart: true, ClientsServedInOrder: true}); rec.Hooks != want {
		t.Errorf("hooks %+v, want %+v", rec.Hooks, want)
	}
	r.add("Transfer", result{failed: true})
	if _, err := r.record("x", "p", driver.Capabilities{}, h); err == nil {
		t.Error("a run with a failed case recorded")
	}
}

// A harness that declares no order records none: the field is left out, so
// that records made before it existed read back unchanged.
func TestRecordOmitsUndeclaredOrder(t *testing.T) {
	b, err := results.Marshal(results.Backend{Name: "x", Hooks: recordHooks(Harness{})})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "clients_served_in_order") {
		t.Errorf("a harness without the declaration recorded it:\n%s", b)
	}
}

func TestWriteRecord(t *testing.T) {
	dir := t.TempDir()
	rec := results.Backend{Name: "memory/Default", Package: "p", Cases: []results.Case{{Name: "A", Outcome: results.Passed}}}
	if err := writeRecord(dir, rec); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "memory.Default.json"))
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := results.Marshal(rec); string(b) != string(want) {
		t.Errorf("wrote %s, want %s", b, want)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("%d files in the directory, want the record alone", len(entries))
	}
	if err := writeRecord("relative", rec); err == nil {
		t.Error("a relative directory accepted")
	}
	rec.Name = "../x"
	if err := writeRecord(dir, rec); err == nil {
		t.Error("a name with a path element '..' accepted")
	}
}
