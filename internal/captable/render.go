package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/dlock-go/dlock/conformance/results"
)

// column is one column of the capability table: its heading, and the cell
// of a record.
type column struct {
	heading string
	cell    func(results.Backend) string
}

// columns are the table's: every field of driver.Capabilities (as the
// record has it), the order across clients the harness declared, the
// harness's fault hooks, and the cases' outcomes. The
// backend's name and package come first.
var columns = []column{
	{"read-write (`Shared`)", func(r results.Backend) string { return yesNo(r.Capabilities.Shared) }},
	{"reentrant", func(r results.Backend) string { return yesNo(r.Capabilities.Reentrant) }},
	{"server-side waiting (`Blocking`)", func(r results.Backend) string { return yesNo(r.Capabilities.Blocking) }},
	// A declaration of the harness's, not a capability: the order cases
	// ran and passed on the backends that say yes.
	{"waiting clients served in arrival order (checked)", func(r results.Backend) string { return yesNo(r.Hooks.ClientsServedInOrder) }},
	{"notifications (`Notifier`)", func(r results.Backend) string { return yesNo(r.Capabilities.Notifier) }},
	{"batched renewal (`BatchExtender`)", func(r results.Backend) string { return yesNo(r.Capabilities.BatchExtender) }},
	{"transfer (`Transferer`)", func(r results.Backend) string { return yesNo(r.Capabilities.Transferer) }},
	{"inspection (`Inspector`)", func(r results.Backend) string { return yesNo(r.Capabilities.Inspector) }},
	{"leader's value (`Values`)", func(r results.Backend) string { return yesNo(r.Capabilities.Values) }},
	{"any permit in one request (`AnyAcquirer`)", func(r results.Backend) string { return yesNo(r.Capabilities.AnyAcquirer) }},
	{"token blocks (`TokenBlock`)", func(r results.Backend) string { return tokenBlock(r.Capabilities.TokenBlock) }},
	{"key rules (`CheckKey`)", func(r results.Backend) string {
		if r.Capabilities.CheckKey {
			return "the core's and the driver's"
		}
		return "the core's"
	}},
	{"TTL as tested (`MinTTL`, `MaxTTL`)", ttlRange},
	{"fault hooks in the suite", hooks},
	{"cases passed / skipped", func(r results.Backend) string {
		skipped := len(skips(r))
		return fmt.Sprintf("%d / %d", len(r.Cases)-skipped, skipped)
	}},
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// tokenBlock shows a TokenBlock: below 2, no grant reserves a block.
func tokenBlock(n uint64) string {
	if n < 2 {
		return "no"
	}
	return fmt.Sprint(n)
}

// ttlRange shows the TTLs a driver accepts beyond the core's own limits.
func ttlRange(r results.Backend) string {
	lo, hi := duration(r.Capabilities.MinTTL), duration(r.Capabilities.MaxTTL)
	switch {
	case lo == "" && hi == "":
		return "the core's"
	case hi == "":
		return "≥ " + lo
	case lo == "":
		return "≤ " + hi
	default:
		return lo + " – " + hi
	}
}

// duration shows a recorded duration in the largest whole unit ("5 s",
// "30 days"), or "" for zero (no limit of the driver's own).
func duration(s string) string {
	d, err := time.ParseDuration(s)
	if err != nil {
		return s // shown as recorded; loadRecords has checked its form only
	}
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{24 * time.Hour, "days"}, {time.Hour, "h"}, {time.Minute, "min"}, {time.Second, "s"}, {time.Millisecond, "ms"}} {
		if d != 0 && d%u.d == 0 {
			n := int64(d / u.d)
			if n == 1 && u.name == "days" {
				return "1 day"
			}
			return fmt.Sprintf("%d %s", n, u.name)
		}
	}
	if d == 0 {
		return ""
	}
	return d.String()
}

// hooks lists the harness's optional hooks, which decide the fault cases
// that ran.
func hooks(r results.Backend) string {
	var hs []string
	for _, h := range []struct {
		on   bool
		name string
	}{{r.Hooks.Tamper, "tamper"}, {r.Hooks.Pause, "pause"}, {r.Hooks.Restart, "restart"}, {r.Hooks.Link, "cut link"}} {
		if h.on {
			hs = append(hs, h.name)
		}
	}
	if len(hs) == 0 {
		return "none"
	}
	return strings.Join(hs, ", ")
}

func skips(r results.Backend) []results.Case {
	var s []results.Case
	for _, c := range r.Cases {
		if c.Outcome == results.Skipped {
			s = append(s, c)
		}
	}
	return s
}

// renderTable is the generated part of the README: the table, one row per
// record, then the drivers' reasons for their TTL limits and the skipped
// cases with their reasons. module is the module's path, so that a driver
// of this module links to its directory.
func renderTable(recs []results.Backend, module string) string {
	var b strings.Builder
	b.WriteString("| backend | package |")
	for _, c := range columns {
		b.WriteString(" " + c.heading + " |")
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(columns)) + "\n")
	for _, r := range recs {
		fmt.Fprintf(&b, "| `%s` | %s |", r.Name, packageLink(r.Package, module))
		for _, c := range columns {
			b.WriteString(" " + escapeCell(c.cell(r)) + " |")
		}
		b.WriteString("\n")
	}

	var limits []string
	for _, r := range recs {
		if ttlRange(r) != "the core's" || r.Capabilities.TTLReason != "" {
			limits = append(limits, fmt.Sprintf("- `%s`: %s: %s\n", r.Name, ttlRange(r), r.Capabilities.TTLReason))
		}
	}
	if len(limits) > 0 {
		b.WriteString("\nTTL limits of the configurations the suite ran (a session-bound driver's follow its session TTL), as the drivers explain them:\n\n")
		for _, l := range limits {
			b.WriteString(l)
		}
	}

	// Skipped cases, each with its reason once and the backends that
	// skipped it for that reason.
	type skip struct{ name, reason string }
	by := map[skip][]string{}
	var order []skip
	for _, r := range recs {
		for _, c := range skips(r) {
			k := skip{c.Name, c.Reason}
			if by[k] == nil {
				order = append(order, k)
			}
			by[k] = append(by[k], "`"+r.Name+"`")
		}
	}
	if len(order) > 0 {
		slices.SortStableFunc(order, func(a, b skip) int {
			return caseIndex(recs, a.name) - caseIndex(recs, b.name)
		})
		b.WriteString("\nCases skipped, and why:\n\n")
		for _, k := range order {
			fmt.Fprintf(&b, "- `%s` on %s: %s\n", k.name, strings.Join(by[k], ", "), k.reason)
		}
	}
	return b.String()
}

// caseIndex is where the suite lists the case, as the records have it.
func caseIndex(recs []results.Backend, name string) int {
	for _, r := range recs {
		if i := slices.IndexFunc(r.Cases, func(c results.Case) bool { return c.Name == name }); i >= 0 {
			return i
		}
	}
	return -1
}

// packageLink links a package of this module to its directory.
func packageLink(pkg, module string) string {
	if rel, ok := strings.CutPrefix(pkg, module+"/"); ok {
		return fmt.Sprintf("[`%s`](%s)", rel, rel)
	}
	return "`" + pkg + "`"
}

// escapeCell keeps a cell's text inside its cell.
func escapeCell(s string) string {
	return strings.ReplaceAll(s, "|", `\|`)
}

// capabilityFields are the capabilities an inline list can name
// (<!-- captable:with:FIELD -->), by their names in the record, and whether
// a record declares each.
var capabilityFields = map[string]func(results.Capabilities) bool{
	"shared":         func(c results.Capabilities) bool { return c.Shared },
	"reentrant":      func(c results.Capabilities) bool { return c.Reentrant },
	"blocking":       func(c results.Capabilities) bool { return c.Blocking },
	"token_block":    func(c results.Capabilities) bool { return c.TokenBlock > 1 },
	"check_key":      func(c results.Capabilities) bool { return c.CheckKey },
	"notifier":       func(c results.Capabilities) bool { return c.Notifier },
	"batch_extender": func(c results.Capabilities) bool { return c.BatchExtender },
	"transferer":     func(c results.Capabilities) bool { return c.Transferer },
	"inspector":      func(c results.Capabilities) bool { return c.Inspector },
	"values":         func(c results.Capabilities) bool { return c.Values },
	"any_acquirer":   func(c results.Capabilities) bool { return c.AnyAcquirer },
}

// declarationFields are the harness's declarations an inline list can
// name, by their names in the record's hooks.
var declarationFields = map[string]func(results.Hooks) bool{
	"clients_served_in_order": func(h results.Hooks) bool { return h.ClientsServedInOrder },
}

// renderWith lists the records that declare the capability field, or the
// harness's declaration field.
func renderWith(recs []results.Backend, field string) (string, error) {
	var has func(results.Backend) bool
	if c, ok := capabilityFields[field]; ok {
		has = func(r results.Backend) bool { return c(r.Capabilities) }
	} else if d, ok := declarationFields[field]; ok {
		has = func(r results.Backend) bool { return d(r.Hooks) }
	} else {
		known := slices.Concat(slices.Collect(maps.Keys(capabilityFields)), slices.Collect(maps.Keys(declarationFields)))
		return "", fmt.Errorf("no capability or declaration %q to list (want one of %s)", field, strings.Join(slices.Sorted(slices.Values(known)), ", "))
	}
	var names []string
	for _, r := range recs {
		if has(r) {
			names = append(names, "`"+r.Name+"`")
		}
	}
	if len(names) == 0 {
		return "none", nil
	}
	return strings.Join(names, ", "), nil
}
