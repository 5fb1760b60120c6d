package etcd

import (
	"strings"
	"testing"

	"github.com/dlock-go/dlock/driver"
)

// hostile are keys that would break a careless mapping: path elements,
// separators, escapes, control bytes, invalid UTF-8, and the longest key.
var hostile = []string{
	"a", " ", "a b", "/", "//", ".", "..", "...", "a/../b", "/zookeeper", "%", "%2F", "%252F", "a%2Fb", "a/b",
	"\x00", "a\x00b", "\r\n", "\x7f", "\xff\xfe", "日本語", "@owner", "q", "e", "w", "r",
	strings.Repeat("x", 1024), strings.Repeat("\xff", 1024), strings.Repeat("/", 1024),
}

func TestEscapeIsInjectiveAndFlat(t *testing.T) {
	seen := map[string]string{}
	for _, k := range hostile {
		e := escape(k)
		if strings.ContainsAny(e, "/ \x00") || e == "." || e == ".." {
			t.Errorf("escape(%q) = %q: contains a separator or is a path element", k, e)
		}
		if back, ok := unescape(e); !ok || back != k {
			t.Errorf("unescape(escape(%q)) = %q, %v", k, back, ok)
		}
		if prev, dup := seen[e]; dup {
			t.Errorf("escape(%q) = escape(%q) = %q", k, prev, e)
		}
		seen[e] = k
	}
	if got := escape("reports/nightly"); got != "reports%2Fnightly" {
		t.Errorf("escape(reports/nightly) = %q", got)
	}
	if got := escape("plain-key_1.2:x"); got != "plain-key_1.2:x" {
		t.Errorf("a plain key changed: %q", got)
	}
}

// The names of one key never fall inside another key's directory, so that
// no range read or delete of one lock touches another's entries.
func TestNamesStayInTheirDirectory(t *testing.T) {
	for _, a := range hostile {
		na := namesOf(DefaultKeyPrefix, a)
		names := []string{
			na.contender(driver.Exclusive, 0x1234, "id"), na.contender(driver.Shared, 0x1234, "id/../x"),
			na.ownerHold(driver.Exclusive, "o/../../x"), na.member(7, 0x1234, "id"),
		}
		for _, n := range names {
			if !strings.HasPrefix(n, na.dir) {
				t.Errorf("name %q of key %q outside its directory %q", n, a, na.dir)
			}
		}
		for _, b := range hostile {
			if a == b {
				continue
			}
			nb := namesOf(DefaultKeyPrefix, b)
			for _, n := range names {
				if strings.HasPrefix(n, nb.dir) {
					t.Errorf("name %q of key %q falls in the directory of key %q", n, a, b)
				}
			}
		}
	}
}

func FuzzEscape(f *testing.F) {
	for _, k := range hostile {
		f.Add(k, "b")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ea, eb := escape(a), escape(b)
		if strings.Contains(ea, "/") {
			t.Fatalf("escape(%q) = %q contains '/'", a, ea)
		}
		if back, ok := unescape(ea); !ok || back != a {
			t.Fatalf("unescape(escape(%q)) = %q, %v", a, back, ok)
		}
		if a != b && ea == eb {
			t.Fatalf("escape(%q) = escape(%q) = %q", a, b, ea)
		}
	})
}
