package hazelcast

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestMapKey(t *testing.T) {
	for k, want := range map[string]string{
		"reports/nightly":         "reports/nightly",
		"a b\r\n\x00":             "a b\r\n\x00", // control bytes are valid UTF-8
		"日本語":                     "日本語",
		"\uFFFD":                  "\uFFFD", // a valid replacement character stays
		"a%b":                     "a%25b",
		"\xff":                    "%FF",
		"%FF":                     "%25FF",
		"a\xe6\x97b":              "a%E6%97b", // a truncated sequence, byte by byte
		"{a}/../*?:":              "{a}/../*?:",
		strings.Repeat("x", 1024): strings.Repeat("x", 1024),
	} {
		if got := mapKey(k); got != want {
			t.Errorf("mapKey(%q) = %q, want %q", k, got, want)
		}
	}
}

// unmapKey inverts mapKey, to show that it is injective.
func unmapKey(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		n, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil || strings.ToUpper(s[i+1:i+3]) != s[i+1:i+3] {
			return "", false
		}
		b.WriteByte(byte(n))
		i += 2
	}
	return b.String(), true
}

func FuzzMapKey(f *testing.F) {
	for _, k := range []string{"a", "%", "%25", "\xff", "\xff\xfe\xfd", "a\x00b", "日本語", "\xef\xbf\xbd", "%FF"} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, k string) {
		m := mapKey(k)
		if !utf8.ValidString(m) {
			t.Fatalf("mapKey(%q) = %q is not valid UTF-8", k, m)
		}
		back, ok := unmapKey(m)
		if !ok || back != k {
			t.Fatalf("mapKey(%q) = %q does not decode back (got %q, %t)", k, m, back, ok)
		}
	})
}
