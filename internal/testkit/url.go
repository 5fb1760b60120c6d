package testkit

import (
	"errors"
	"maps"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/dlock-go/dlock"
)

// URL parses raw with net/url, failing tb when it cannot.
func URL(tb testing.TB, raw string) *url.URL {
	tb.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		tb.Fatalf("url.Parse(%q): %v", raw, err)
	}
	return u
}

// ParsesURLs checks parse, a driver's URL parser, on URLs it must accept:
// for each URL of want, in order, parse must succeed and return what want
// says. parse returns the parts of the parser's result that the test checks,
// as a comparable value (a struct of the test's own).
func ParsesURLs[P comparable](t *testing.T, parse func(*url.URL) (P, error), want map[string]P) {
	t.Helper()
	for _, raw := range slices.Sorted(maps.Keys(want)) {
		got, err := parse(URL(t, raw))
		if err != nil {
			t.Errorf("parse(%q): %v", raw, err)
			continue
		}
		if got != want[raw] {
			t.Errorf("parse(%q) = %+v, want %+v", raw, got, want[raw])
		}
	}
}

// RefusesURLs checks that parse, a driver's URL parser, refuses every URL of
// raws with an error wrapping dlock.ErrInvalidURL that does not show secret
// (the password some of them carry). A URL that net/url refuses already
// passes: dlock.Open reports it as ErrInvalidURL before any driver sees it.
func RefusesURLs(t *testing.T, parse func(*url.URL) error, secret string, raws ...string) {
	t.Helper()
	for _, raw := range raws {
		u, err := url.Parse(raw)
		if err != nil {
			continue
		}
		err = parse(u)
		if !errors.Is(err, dlock.ErrInvalidURL) {
			t.Errorf("parse(%q): got %v, want ErrInvalidURL", raw, err)
		}
		if err != nil && secret != "" && strings.Contains(err.Error(), secret) {
			t.Errorf("parse(%q): the error shows the password: %v", raw, err)
		}
	}
}
