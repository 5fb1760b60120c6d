package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/dlock-go/dlock/conformance/results"
)

// Each driver's package doc says in words what the driver declares, under
// its "# Capabilities" heading, in a sentence that begins "Capabilities"
// and lists the capabilities' names (Shared, TokenBlock 16, MinTTL 2 s, …).
// The sentence is written by hand for the reader, so checkDocClaims holds it
// to the driver's record: the names it lists must be exactly the
// capabilities the record declares. Names the rest of the section mentions
// ("no Notifier") are prose and not checked.

// capabilityNames maps each capability's Go name (as the doc sentence and
// driver.Capabilities spell it) to whether a record declares it.
var capabilityNames = map[string]func(results.Capabilities) bool{
	"Shared":        func(c results.Capabilities) bool { return c.Shared },
	"Reentrant":     func(c results.Capabilities) bool { return c.Reentrant },
	"Blocking":      func(c results.Capabilities) bool { return c.Blocking },
	"TokenBlock":    func(c results.Capabilities) bool { return c.TokenBlock > 0 },
	"MinTTL":        func(c results.Capabilities) bool { return c.MinTTL != "0s" && c.MinTTL != "" },
	"MaxTTL":        func(c results.Capabilities) bool { return c.MaxTTL != "0s" && c.MaxTTL != "" },
	"CheckKey":      func(c results.Capabilities) bool { return c.CheckKey },
	"Notifier":      func(c results.Capabilities) bool { return c.Notifier },
	"BatchExtender": func(c results.Capabilities) bool { return c.BatchExtender },
	"Transferer":    func(c results.Capabilities) bool { return c.Transferer },
	"Inspector":     func(c results.Capabilities) bool { return c.Inspector },
	"Values":        func(c results.Capabilities) bool { return c.Values },
	"AnyAcquirer":   func(c results.Capabilities) bool { return c.AnyAcquirer },
}

var (
	parenthesised = regexp.MustCompile(`\([^()]*\)`)
	docLink       = regexp.MustCompile(`\[[^\]]*\]`)
	word          = regexp.MustCompile(`[A-Za-z]+`)
)

// checkDocClaims compares the capability sentence of each of the module's
// drivers with its record. Only a driver's main record is checked (a name
// without a slash: "redis", not "redis/RedLock", whose variants the doc
// describes in prose), and only a package of this module, whose doc.go is
// under root.
func checkDocClaims(root, module string, records []results.Backend) []string {
	var problems []string
	for _, rec := range records {
		rel, ok := strings.CutPrefix(rec.Package, module+"/")
		if !ok || strings.Contains(rec.Name, "/") {
			continue
		}
		doc := filepath.Join(root, filepath.FromSlash(rel), "doc.go")
		b, err := os.ReadFile(doc)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v (the record of %s names this package)", doc, err, rec.Name))
			continue
		}
		claimed, err := claimedCapabilities(string(b))
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", doc, err))
			continue
		}
		var declared []string
		for name, has := range capabilityNames {
			if has(rec.Capabilities) {
				declared = append(declared, name)
			}
		}
		slices.Sort(declared)
		if !slices.Equal(claimed, declared) {
			problems = append(problems, fmt.Sprintf("%s: the Capabilities sentence lists %v, but the record of %s declares %v", doc, claimed, rec.Name, declared))
		}
	}
	return problems
}

// claimedCapabilities finds the first sentence beginning "Capabilities"
// after the "# Capabilities" heading of a package doc and returns the
// capability names it lists, sorted. Parenthesised asides and doc links
// are left out, and the sentence ends at its first full stop or semicolon
// outside them.
func claimedCapabilities(src string) ([]string, error) {
	var text strings.Builder
	inSection := false
	for line := range strings.Lines(src) {
		comment, ok := strings.CutPrefix(strings.TrimSpace(line), "//")
		if !ok {
			continue
		}
		comment = strings.TrimSpace(comment)
		if strings.HasPrefix(comment, "# ") {
			inSection = comment == "# Capabilities"
			continue
		}
		if inSection {
			text.WriteString(comment + " ")
		}
	}
	section := strings.TrimSpace(text.String())
	if section == "" {
		return nil, fmt.Errorf("no \"# Capabilities\" section")
	}
	if !strings.HasPrefix(section, "Capabilities") {
		return nil, fmt.Errorf("the \"# Capabilities\" section does not begin with a sentence \"Capabilities: …\"")
	}
	sentence := docLink.ReplaceAllString(section, "")
	for prev := ""; prev != sentence; {
		prev, sentence = sentence, parenthesised.ReplaceAllString(sentence, "")
	}
	sentence = strings.TrimPrefix(sentence, "Capabilities")
	if i := strings.IndexAny(sentence, ".;"); i >= 0 {
		sentence = sentence[:i]
	}
	var names []string
	for _, w := range word.FindAllString(sentence, -1) {
		if _, ok := capabilityNames[w]; ok && !slices.Contains(names, w) {
			names = append(names, w)
		}
	}
	slices.Sort(names)
	return names, nil
}
