// Package results is the format of the conformance suite's records: what
// conformance.Run established about one backend, written as JSON when Env
// names a directory, and read back by whoever renders them (this project
// generates its README's capability table from its drivers' records).
//
// A record holds only facts that are the same on every passing run (no
// timings, no counts), and Marshal writes it the same way every time, so
// that two runs' records can be compared byte for byte.
package results

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Env names the environment variable that makes conformance.Run keep a
// record: when it names a directory (an absolute path, since each
// package's tests run in their own directory), every Run that ran all of
// the suite's cases and passed writes its Backend there, in the file
// FileName gives. This project checks its drivers' records in
// (docs/conformance) and its CI compares each run's records with those, so
// that the table made from them cannot go stale.
const Env = "DLOCK_CONFORMANCE_RECORD"

// Backend is what one conformance.Run established about a backend: its
// driver's capabilities, the hooks its harness gave the suite, and how each
// case ended.
type Backend struct {
	// Name is the harness's: conformance.Harness.Name, or the one Run
	// derived from the driver's package and the test's name.
	Name string `json:"name"`
	// Package is the import path of the driver's package (of the concrete
	// type the harness's NewDriver returned).
	Package      string       `json:"package"`
	Capabilities Capabilities `json:"capabilities"`
	Hooks        Hooks        `json:"hooks"`
	// Cases are the suite's cases in the order the suite lists them.
	Cases []Case `json:"cases"`
}

// Capabilities is driver.Capabilities as data: its facts as they are, and
// whether each optional behaviour (a function or an interface) is present.
type Capabilities struct {
	Shared     bool   `json:"shared"`
	Reentrant  bool   `json:"reentrant"`
	Blocking   bool   `json:"blocking"`
	TokenBlock uint64 `json:"token_block"`
	// MinTTL and MaxTTL are the declared limits in Go's duration syntax
	// ("5s"); "0s" leaves that end as the core has it.
	MinTTL        string `json:"min_ttl"`
	MaxTTL        string `json:"max_ttl"`
	TTLReason     string `json:"ttl_reason,omitempty"`
	CheckKey      bool   `json:"check_key"`
	Notifier      bool   `json:"notifier"`
	BatchExtender bool   `json:"batch_extender"`
	Transferer    bool   `json:"transferer"`
	Inspector     bool   `json:"inspector"`
	// Values: the driver stores a hold's Request.Value and reports it in
	// Info.Value (an election's leader). Omitted when false, so that the
	// records written before drivers could declare it read unchanged.
	Values bool `json:"values,omitempty"`
	// AnyAcquirer: the driver takes the first free lock among several in
	// one request (a semaphore's permits). Omitted when false, as Values.
	AnyAcquirer bool `json:"any_acquirer,omitempty"`
}

// Hooks says which of the harness's optional hooks and declarations were
// given, and so which cases could run.
type Hooks struct {
	Tamper  bool `json:"tamper"`  // Harness.Tamper
	Pause   bool `json:"pause"`   // Faults.Pause and Faults.Resume
	Restart bool `json:"restart"` // Faults.Restart
	Link    bool `json:"link"`    // Harness.NewLinkedDriver
	// ClientsServedInOrder: the harness declares that the backend serves
	// waiting clients in arrival order (Harness.ClientsServedInOrder), and
	// the order cases checked it. Omitted when false, so that the records
	// written before harnesses could declare it read unchanged.
	ClientsServedInOrder bool `json:"clients_served_in_order,omitempty"`
}

// Case is how one case ended in a passing run.
type Case struct {
	Name string `json:"name"`
	// Outcome is Passed or Skipped.
	Outcome string `json:"outcome"`
	// Reason is why the case was skipped (a missing capability or hook).
	Reason string `json:"reason,omitempty"`
}

// The outcomes of a Case.
const (
	Passed  = "passed"
	Skipped = "skipped"
)

// validName is what a Backend's name may be: path elements of letters,
// digits, '.', '_' and '-' (not starting with '.'), which make a portable
// file name.
var validName = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9._-]*(/[A-Za-z0-9_-][A-Za-z0-9._-]*)*$`)

// CheckName reports whether name can name a record.
func CheckName(name string) error {
	if !validName.MatchString(name) {
		return fmt.Errorf("record name %q: want path elements of letters, digits, '.', '_' and '-', not starting with '.'", name)
	}
	return nil
}

// FileName is the name of the file the record of the backend called name
// is written to: the name with each '/' made a '.', and ".json".
func FileName(name string) string {
	return strings.ReplaceAll(name, "/", ".") + ".json"
}

// Marshal encodes b as the suite writes it: indented JSON ending in a
// newline, so that records diff well under version control.
func Marshal(b Backend) ([]byte, error) {
	if err := CheckName(b.Name); err != nil {
		return nil, err
	}
	out, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// Unmarshal decodes a record strictly: no unknown fields, nothing after
// it, and exactly the bytes Marshal writes, so that a record edited by
// hand is refused rather than compared.
func Unmarshal(data []byte) (Backend, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var b Backend
	if err := dec.Decode(&b); err != nil {
		return Backend{}, err
	}
	if dec.More() {
		return Backend{}, errors.New("data after the record")
	}
	canonical, err := Marshal(b)
	if err != nil {
		return Backend{}, err
	}
	if !bytes.Equal(canonical, data) {
		return Backend{}, errors.New("not as the conformance suite writes it (edited by hand?)")
	}
	return b, nil
}
