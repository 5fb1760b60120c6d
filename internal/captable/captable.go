package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// config says where the module, its records and its README are.
type config struct {
	root, records, readme string
}

// render returns the README as it should be, from the checked-in records,
// and as it is.
func (c config) render() (want, have string, err error) {
	set, err := loadRecords(c.records)
	if err != nil {
		return "", "", err
	}
	module, err := modulePath(c.root)
	if err != nil {
		return "", "", err
	}
	b, err := os.ReadFile(c.readme)
	if err != nil {
		return "", "", err
	}
	want, err = splice(string(b), set.records, module)
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", c.readme, err)
	}
	return want, string(b), nil
}

// generate renders the README from the records, after replacing the
// records with those in install when it is not empty.
func (c config) generate(install string) error {
	if install != "" {
		if err := c.install(install); err != nil {
			return err
		}
	}
	want, have, err := c.render()
	if err != nil || want == have {
		return err
	}
	return os.WriteFile(c.readme, []byte(want), 0o644)
}

// install replaces the checked-in records with the run's in dir: every
// record of dir is copied, and every checked-in one that dir lacks is
// removed (its harness did not run, or no longer exists). A dir with no
// records is refused: the tests did not run with the records on.
func (c config) install(dir string) error {
	fresh, err := loadRecords(dir)
	if err != nil {
		return err
	}
	if len(fresh.files) == 0 {
		return fmt.Errorf("%s holds no records: did the tests run with the record variable set?", dir)
	}
	old, err := loadRecords(c.records)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.records, 0o755); err != nil {
		return err
	}
	for file := range old.files {
		if _, ok := fresh.files[file]; !ok {
			fmt.Fprintf(os.Stderr, "captable: removing %s: this run wrote no such record\n", filepath.Join(c.records, file))
			if err := os.Remove(filepath.Join(c.records, file)); err != nil {
				return err
			}
		}
	}
	for file, b := range fresh.files {
		if err := os.WriteFile(filepath.Join(c.records, file), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// check fails when the README is not what the checked-in records render,
// when a driver's package doc lists other capabilities than its record
// declares, or, with fresh, when the records of the run in fresh differ from the
// checked-in ones.
func (c config) check(fresh string) error {
	var problems []string
	if fresh != "" {
		want, err := loadRecords(c.records)
		if err != nil {
			return err
		}
		got, err := loadRecords(fresh)
		if err != nil {
			return err
		}
		problems = append(problems, staleRecords(want, got, c.records)...)
	}
	want, have, err := c.render()
	if err != nil {
		return err
	}
	problems = append(problems, c.docClaims()...)
	if want != have {
		problems = append(problems, fmt.Sprintf("%s: the capability table is not what %s renders (- in the file, + rendered):\n%s", c.readme, c.records, lineDiff(have, want)))
	}
	if len(problems) > 0 {
		return fmt.Errorf("stale:\n%s\nRun `make captable` (the tests, with containers) to refresh the records and the table, or `go generate ./internal/captable` for the table alone; a driver's Capabilities sentence is corrected by hand in its doc.go", strings.Join(problems, "\n"))
	}
	return nil
}

// docClaims checks the drivers' capability sentences against the
// checked-in records (checkDocClaims).
func (c config) docClaims() []string {
	set, err := loadRecords(c.records)
	if err != nil {
		return []string{err.Error()}
	}
	module, err := modulePath(c.root)
	if err != nil {
		return []string{err.Error()}
	}
	return checkDocClaims(c.root, module, set.records)
}

// modulePath reads the module's path from root's go.mod.
func modulePath(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	return "", fmt.Errorf("%s: no module line", filepath.Join(root, "go.mod"))
}
