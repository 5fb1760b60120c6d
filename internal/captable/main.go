// Command captable keeps the README's backend capability table true: it
// renders the table from the conformance suite's records (the JSON files
// that conformance.Run writes when results.Env names a directory, checked
// in under docs/conformance), and checks that what is checked in is
// current, and that each driver's package doc lists under "# Capabilities"
// the capabilities its record declares (docclaims.go).
//
//	go run ./internal/captable                   # render the table into README.md
//	go run ./internal/captable -check            # fail when README.md is stale
//	go run ./internal/captable -check -fresh DIR # also when DIR's records differ
//	go run ./internal/captable -install DIR      # take DIR's records, then render
//
// The README holds the generated parts between marker comments:
// <!-- captable:table --> and <!-- /captable:table --> around the table, and
// <!-- captable:with:FIELD --> and <!-- /captable:with:FIELD --> around an
// inline list of the backends whose records declare a capability or a
// harness's declaration (FIELD is its name in the record, such as
// token_block or clients_served_in_order). Everything else in the file
// is left as it is.
//
// `make test` runs the tests with the records written to a temporary
// directory and then this command with -check -fresh, so that CI fails when
// a driver's capabilities or a case's outcome changed without the records
// and the table; `make captable` refreshes both.
package main

//go:generate go run . -root ../..

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	root := flag.String("root", ".", "the module's root directory")
	records := flag.String("records", "docs/conformance", "the checked-in records, relative to -root")
	readme := flag.String("readme", "README.md", "the file holding the table, relative to -root")
	check := flag.Bool("check", false, "change nothing; fail when the file or the records are stale")
	fresh := flag.String("fresh", "", "with -check: a directory of records from a run of the tests, to compare with the checked-in ones")
	install := flag.String("install", "", "a directory of records from a run of the tests, to replace the checked-in ones with before rendering")
	flag.Parse()
	if flag.NArg() > 0 || (*fresh != "" && !*check) || (*install != "" && *check) {
		flag.Usage()
		os.Exit(2)
	}
	cfg := config{
		root:    *root,
		records: filepath.Join(*root, *records),
		readme:  filepath.Join(*root, *readme),
	}
	var err error
	switch {
	case *check:
		err = cfg.check(*fresh)
	default:
		err = cfg.generate(*install)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "captable:", err)
		os.Exit(1)
	}
}
