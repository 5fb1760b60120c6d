package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dlock-go/dlock/conformance/results"
)

// recordSet is a directory's records: each file's bytes by file name, and
// the records decoded, sorted by name.
type recordSet struct {
	files   map[string][]byte
	records []results.Backend
}

// loadRecords reads every *.json file of dir as a record. A file must be
// exactly what the suite writes (its name from the record's, its bytes
// from results.Marshal: results.Unmarshal checks), so that comparing bytes
// compares records and nobody edits one by hand unnoticed.
func loadRecords(dir string) (recordSet, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return recordSet{}, err
	}
	set := recordSet{files: make(map[string][]byte, len(names))}
	var errs []error
	for _, path := range names {
		b, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rec, err := results.Unmarshal(b)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
			continue
		}
		if want := results.FileName(rec.Name); filepath.Base(path) != want {
			errs = append(errs, fmt.Errorf("%s: the record of %s belongs in %s", path, rec.Name, want))
			continue
		}
		set.files[filepath.Base(path)] = b
		set.records = append(set.records, rec)
	}
	slices.SortFunc(set.records, func(a, b results.Backend) int { return strings.Compare(a.Name, b.Name) })
	return set, errors.Join(errs...)
}

// staleRecords compares the records of a run of the tests (fresh) with the
// checked-in ones (want, from wantDir) and says, file by file, what
// differs. A checked-in record that the run did not produce is stale too:
// its harness was skipped (no server, no image), failed, or ran only in
// part, so the run established nothing about that backend.
func staleRecords(want, fresh recordSet, wantDir string) []string {
	var problems []string
	for _, file := range sortedKeys(want.files) {
		got, ok := fresh.files[file]
		switch {
		case !ok && unavailable(file) != "":
			fmt.Fprintf(os.Stderr, "captable: %s: not produced by this run, and not required: testenv/setup could not build this backend's server image (%s)\n", file, unavailable(file))
		case !ok:
			problems = append(problems, fmt.Sprintf("%s: this run wrote no such record: its conformance run was skipped (no server or image?), failed, or ran only some cases; every checked-in record must be produced by every run (remove the file if the harness is gone)", filepath.Join(wantDir, file)))
		case !bytes.Equal(got, want.files[file]):
			problems = append(problems, fmt.Sprintf("%s: this run's record differs (- checked in, + this run):\n%s", filepath.Join(wantDir, file), lineDiff(string(want.files[file]), string(got))))
		}
	}
	for _, file := range sortedKeys(fresh.files) {
		if _, ok := want.files[file]; !ok {
			problems = append(problems, fmt.Sprintf("%s: a new record from this run, not checked in", filepath.Join(wantDir, file)))
		}
	}
	return problems
}

func sortedKeys(m map[string][]byte) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// lineDiff shows how b differs from a, line by line: the lines only a has
// prefixed "-", those only b has "+", with the lines around each change
// for context (a longest common subsequence; records are small).
func lineDiff(a, b string) string {
	x, y := strings.Split(a, "\n"), strings.Split(b, "\n")
	// lcs[i][j] is the length of the longest common subsequence of x[i:]
	// and y[j:].
	lcs := make([][]int, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type line struct {
		op   byte
		text string
	}
	var lines []line
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			lines = append(lines, line{' ', x[i]})
			i, j = i+1, j+1
		case i < len(x) && (j == len(y) || lcs[i+1][j] >= lcs[i][j+1]):
			lines = append(lines, line{'-', x[i]})
			i++
		default:
			lines = append(lines, line{'+', y[j]})
			j++
		}
	}
	const context = 2
	var out strings.Builder
	last := -1 // the last line written
	for k, l := range lines {
		if l.op == ' ' {
			continue
		}
		from := max(k-context, last+1)
		if last >= 0 && from > last+1 {
			out.WriteString("  ...\n")
		}
		for c := from; c < k; c++ {
			fmt.Fprintf(&out, "  %s\n", lines[c].text)
		}
		fmt.Fprintf(&out, "%c %s\n", l.op, l.text)
		last = k
		for c := k + 1; c < len(lines) && c <= k+context && lines[c].op == ' '; c++ {
			fmt.Fprintf(&out, "  %s\n", lines[c].text)
			last = c
		}
	}
	return out.String()
}

// unavailable returns why testenv/setup could not build the server image of
// the backend a record file is named after (the name up to its first dot),
// or "" when it could. Only Hazelcast's image can be missing on a machine
// that runs the tests: its member jar comes from Maven Central, and where
// that cannot be reached its tests skip with the reason, so its record
// cannot be produced and is not asked for.
func unavailable(file string) string {
	backend, _, _ := strings.Cut(file, ".")
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	reason, err := os.ReadFile(filepath.Join(dir, "dlock-testenv", backend+".unavailable"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(reason))
}
