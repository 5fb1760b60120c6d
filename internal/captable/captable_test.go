package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/conformance/results"
)

const module = "github.com/dlock-go/dlock"

// records are two made-up records: a plain driver of another module with a
// TTL limit and skipped cases, and one of this module with every
// capability.
func records() []results.Backend {
	return []results.Backend{
		{
			Name:         "mariadb",
			Package:      "example.com/mariadb",
			Capabilities: results.Capabilities{MinTTL: "5s", MaxTTL: "0s", TTLReason: "whole seconds"},
			Cases: []results.Case{
				{Name: "MutualExclusion", Outcome: results.Passed},
				{Name: "ReadersShare", Outcome: results.Skipped, Reason: "the driver has no read-write locks"},
				{Name: "Transfer", Outcome: results.Skipped, Reason: "the driver declares no Transferer"},
			},
		},
		{
			Name:    "memory/TokenBlocks",
			Package: module + "/drivers/memory",
			Capabilities: results.Capabilities{Shared: true, Reentrant: true, TokenBlock: 8, MinTTL: "0s", MaxTTL: "0s",
				CheckKey: true, Notifier: true, BatchExtender: true, Transferer: true, Inspector: true, Values: true},
			Hooks: results.Hooks{Tamper: true, Pause: true, Restart: true, ClientsServedInOrder: true},
			Cases: []results.Case{
				{Name: "MutualExclusion", Outcome: results.Passed},
				{Name: "ReadersShare", Outcome: results.Passed},
				{Name: "Transfer", Outcome: results.Passed},
			},
		},
	}
}

func TestRenderTable(t *testing.T) {
	got := renderTable(records(), module)
	for _, want := range []string{
		"| `mariadb` | `example.com/mariadb` | no | no | no | no | no | no | no | no | no | no | no | the core's | ≥ 5 s | none | 1 / 2 |\n",
		"| `memory/TokenBlocks` | [`drivers/memory`](drivers/memory) | yes | yes | no | yes | yes | yes | yes | yes | yes | no | 8 | the core's and the driver's | the core's | tamper, pause, restart | 3 / 0 |\n",
		"- `mariadb`: ≥ 5 s: whole seconds\n",
		"- `ReadersShare` on `mariadb`: the driver has no read-write locks\n- `Transfer` on `mariadb`: the driver declares no Transferer\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the table lacks %q:\n%s", want, got)
		}
	}
	header, rule, _ := strings.Cut(got, "\n")
	rule, _, _ = strings.Cut(rule, "\n")
	if strings.Count(header, "|") != strings.Count(rule, "|") {
		t.Errorf("the header has %d cells, the rule under it %d:\n%s", strings.Count(header, "|"), strings.Count(rule, "|"), got)
	}
	if again := renderTable(records(), module); again != got {
		t.Error("two renderings of the same records differ")
	}
}

// Every recorded capability shows in the table: changing any one field
// changes the rendering.
func TestEveryCapabilityShows(t *testing.T) {
	base := records()[:1]
	before := renderTable(base, module)
	v := reflect.ValueOf(&base[0].Capabilities).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		old := reflect.ValueOf(f.Interface())
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(!f.Bool())
		case reflect.Uint64:
			f.SetUint(16)
		case reflect.String:
			f.SetString("1h")
		default:
			t.Fatalf("field %s: kind %v not handled by this test", v.Type().Field(i).Name, f.Kind())
		}
		if renderTable(base, module) == before {
			t.Errorf("changing %s does not change the table", v.Type().Field(i).Name)
		}
		f.Set(old)
	}
}

func TestDuration(t *testing.T) {
	for in, want := range map[string]string{"0s": "", "10ms": "10 ms", "1.5s": "1500 ms", "5s": "5 s", "2m0s": "2 min", "24h0m0s": "1 day", "720h0m0s": "30 days", "1h30m0s": "90 min", "1µs": "1µs"} {
		if got := duration(in); got != want {
			t.Errorf("duration(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSplice(t *testing.T) {
	doc := "# x\n\nTokens in blocks: <!-- captable:with:token_block -->old<!-- /captable:with:token_block -->.\n\n<!-- captable:table -->\nold table\n<!-- /captable:table -->\n\nafter\n"
	got, err := splice(doc, records(), module)
	if err != nil {
		t.Fatal(err)
	}
	want := "# x\n\nTokens in blocks: <!-- captable:with:token_block -->`memory/TokenBlocks`<!-- /captable:with:token_block -->.\n\n<!-- captable:table -->\n" + renderTable(records(), module) + "<!-- /captable:table -->\n\nafter\n"
	if got != want {
		t.Errorf("splice:\n%s\nwant:\n%s", got, want)
	}
	if again, err := splice(got, records(), module); err != nil || again != got {
		t.Errorf("splicing a current document changed it (err %v):\n%s", err, lineDiff(got, again))
	}
	if list, _ := renderWith(records()[:1], "transferer"); list != "none" {
		t.Errorf("an empty list renders as %q", list)
	}
	if list, err := renderWith(records(), "clients_served_in_order"); err != nil || list != "`memory/TokenBlocks`" {
		t.Errorf("the list of a declaration renders as %q (err %v)", list, err)
	}

	for name, bad := range map[string]string{
		"no table":       "text\n",
		"two tables":     "<!-- captable:table --><!-- /captable:table --><!-- captable:table --><!-- /captable:table -->",
		"unpaired":       "<!-- captable:table -->\n",
		"mismatched":     "<!-- captable:table --><!-- /captable:with:shared -->",
		"unknown part":   "<!-- captable:table --><!-- /captable:table --><!-- captable:list --><!-- /captable:list -->",
		"unknown field":  "<!-- captable:table --><!-- /captable:table --><!-- captable:with:fast --><!-- /captable:with:fast -->",
		"stray end mark": "<!-- captable:table --><!-- /captable:table --><!-- /captable:table -->",
	} {
		if _, err := splice(bad, records(), module); err == nil {
			t.Errorf("%s: splice accepted %q", name, bad)
		}
	}
}

// writeRecords writes recs into dir as the suite would.
func writeRecords(t *testing.T, dir string, recs ...results.Backend) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		b, err := results.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, results.FileName(r.Name)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestStaleRecords(t *testing.T) {
	recs := records()
	dir := t.TempDir()
	checkedIn, same, fresh := filepath.Join(dir, "in"), filepath.Join(dir, "same"), filepath.Join(dir, "fresh")
	writeRecords(t, checkedIn, recs...)
	writeRecords(t, same, recs...)
	changed := recs[1]
	changed.Capabilities.Inspector = false
	added := results.Backend{Name: "etcd", Package: "p"}
	writeRecords(t, fresh, changed, added) // and no mariadb

	want, err := loadRecords(checkedIn)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := loadRecords(same); err != nil || len(staleRecords(want, s, checkedIn)) != 0 {
		t.Errorf("identical records reported stale: %v %v", err, staleRecords(want, s, checkedIn))
	}
	got, err := loadRecords(fresh)
	if err != nil {
		t.Fatal(err)
	}
	problems := strings.Join(staleRecords(want, got, checkedIn), "\n")
	for _, want := range []string{
		"mariadb.json: this run wrote no such record",
		"memory.TokenBlocks.json: this run's record differs",
		`-     "inspector": true`,
		`+     "inspector": false`,
		"etcd.json: a new record",
	} {
		if !strings.Contains(problems, want) {
			t.Errorf("the problems lack %q:\n%s", want, problems)
		}
	}
}

// A record must be exactly what the suite writes, in the file named after it.
func TestLoadRecordsStrict(t *testing.T) {
	for name, edit := range map[string]func(dir string){
		"edited": func(dir string) {
			p := filepath.Join(dir, "mariadb.json")
			b, _ := os.ReadFile(p)
			_ = os.WriteFile(p, []byte(strings.Replace(string(b), "  ", "\t", 1)), 0o644)
		},
		"unknown field": func(dir string) {
			p := filepath.Join(dir, "mariadb.json")
			b, _ := os.ReadFile(p)
			_ = os.WriteFile(p, []byte(strings.Replace(string(b), "{\n", "{\n  \"speed\": 1,\n", 1)), 0o644)
		},
		"renamed": func(dir string) {
			_ = os.Rename(filepath.Join(dir, "mariadb.json"), filepath.Join(dir, "other.json"))
		},
	} {
		dir := t.TempDir()
		writeRecords(t, dir, records()...)
		edit(dir)
		if _, err := loadRecords(dir); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
}

// generate, install and check, as make runs them.
func TestCheck(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module "+module+"\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	readme := filepath.Join(root, "README.md")
	if err := os.WriteFile(readme, []byte("# x\n<!-- captable:table -->\n<!-- /captable:table -->\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := config{root: root, records: filepath.Join(root, "docs", "conformance"), readme: readme}
	if err := c.check(""); err == nil {
		t.Error("a README without the table's rows passed the check")
	}

	run := filepath.Join(root, "run")
	writeRecords(t, run, records()...)
	writeRecords(t, c.records, results.Backend{Name: "gone", Package: "p"})
	if err := c.generate(run); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(c.records, "gone.json")); !os.IsNotExist(err) {
		t.Errorf("install kept a record the run did not write (%v)", err)
	}
	if err := c.check(run); err != nil {
		t.Errorf("check after generate: %v", err)
	}

	// A run that skipped a harness fails the check, naming it.
	if err := os.Remove(filepath.Join(run, "mariadb.json")); err != nil {
		t.Fatal(err)
	}
	if err := c.check(run); err == nil || !strings.Contains(err.Error(), "mariadb.json: this run wrote no such record") {
		t.Errorf("check with a harness missing from the run: %v", err)
	}
	if err := c.generate(t.TempDir()); err == nil {
		t.Error("installing an empty run succeeded")
	}

	// A README edited by hand fails the check.
	b, _ := os.ReadFile(readme)
	if err := os.WriteFile(readme, []byte(strings.Replace(string(b), "| 8 |", "| 16 |", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.check(""); err == nil || !strings.Contains(err.Error(), "the capability table is not what") {
		t.Errorf("check of an edited table: %v", err)
	}
}

func TestLineDiff(t *testing.T) {
	a := "1\n2\n3\n4\n5\n6\n7\n8\n9\n"
	b := "1\n2\n3\nfour\n5\n6\n7\n8\n9\nten\n"
	want := "  2\n  3\n- 4\n+ four\n  5\n  6\n  ...\n  8\n  9\n+ ten\n  \n"
	if got := lineDiff(a, b); got != want {
		t.Errorf("lineDiff:\n%s\nwant:\n%s", got, want)
	}
}

func TestClaimedCapabilities(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want []string
		err  bool
	}{
		{doc: "// Package x.\n//\n// # Capabilities\n//\n// Capabilities ([Driver.Capabilities]): Shared, Blocking (on the\n// server, FIFO), MinTTL 2 s; on [Other] the same but Shared. No Notifier.\npackage x\n",
			want: []string{"Blocking", "MinTTL", "Shared"}},
		{doc: "// # Capabilities\n//\n// Capabilities: TokenBlock 16, MaxTTL 30 days. No Inspector.\n//\n// # Keys\n//\n// Capabilities: Shared.\n",
			want: []string{"MaxTTL", "TokenBlock"}},
		{doc: "// Package x declares Shared.\npackage x\n", err: true},
		{doc: "// # Capabilities\n//\n// It is Shared.\n", err: true},
	} {
		got, err := claimedCapabilities(tc.doc)
		if (err != nil) != tc.err || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("claimedCapabilities(%q) = %v, %v; want %v (error: %v)", tc.doc, got, err, tc.want, tc.err)
		}
	}
}

// TestDocClaimsOfThisModule holds every driver's Capabilities sentence to
// its checked-in record.
func TestDocClaimsOfThisModule(t *testing.T) {
	root := filepath.Join("..", "..")
	set, err := loadRecords(filepath.Join(root, "docs", "conformance"))
	if err != nil {
		t.Fatal(err)
	}
	if problems := checkDocClaims(root, module, set.records); len(problems) > 0 {
		t.Error(strings.Join(problems, "\n"))
	}
	var wrong []results.Backend
	for _, rec := range set.records {
		if rec.Name == "redis" {
			rec.Capabilities.Transferer = false
			wrong = append(wrong, rec)
		}
	}
	if len(wrong) != 1 || len(checkDocClaims(root, module, wrong)) != 1 {
		t.Errorf("a record without Transferer passed redis's doc, which lists it")
	}
}
