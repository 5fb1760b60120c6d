package main

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/dlock-go/dlock/conformance/results"
)

// marker finds the generated parts of a file: <!-- captable:NAME -->, the
// text that is generated, and <!-- /captable:NAME -->.
var marker = regexp.MustCompile(`(?s)<!-- captable:([a-z_:]+) -->(.*?)<!-- /captable:([a-z_:]+) -->`)

// splice returns doc with each generated part rendered anew from recs. The
// table (captable:table) is set on lines of its own, an inline list
// (captable:with:FIELD) within its line. doc must hold the table once.
func splice(doc string, recs []results.Backend, module string) (string, error) {
	var errs []string
	tables := 0
	out := marker.ReplaceAllStringFunc(doc, func(m string) string {
		sub := marker.FindStringSubmatch(m)
		name, end := sub[1], sub[3]
		if name != end {
			errs = append(errs, fmt.Sprintf("<!-- captable:%s --> ends with <!-- /captable:%s -->", name, end))
			return m
		}
		begin, finish := "<!-- captable:"+name+" -->", "<!-- /captable:"+name+" -->"
		if name == "table" {
			tables++
			return begin + "\n" + renderTable(recs, module) + finish
		}
		if field, ok := strings.CutPrefix(name, "with:"); ok {
			list, err := renderWith(recs, field)
			if err != nil {
				errs = append(errs, err.Error())
				return m
			}
			return begin + list + finish
		}
		errs = append(errs, fmt.Sprintf("<!-- captable:%s -->: no such generated part (want table or with:FIELD)", name))
		return m
	})
	// A marker left over is one whose pair is missing.
	rest := marker.ReplaceAllString(doc, "")
	for _, half := range []string{"<!-- captable:", "<!-- /captable:"} {
		if strings.Contains(rest, half) {
			errs = append(errs, fmt.Sprintf("a %s...--> marker without its pair", half))
		}
	}
	if tables != 1 {
		errs = append(errs, fmt.Sprintf("want one <!-- captable:table --> ... <!-- /captable:table -->, found %d", tables))
	}
	if len(errs) > 0 {
		return "", fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return out, nil
}
