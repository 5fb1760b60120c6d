package percent

import "testing"

func TestEscape(t *testing.T) {
	letters := func(c byte) bool { return 'a' <= c && c <= 'z' }
	for in, want := range map[string]string{
		"":         "",
		"abc":      "abc",
		"a/b":      "a%2Fb",
		"%":        "%25",
		"\x00\xff": "%00%FF",
		"ab C":     "ab%20%43",
	} {
		if got := Escape(in, letters); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { Escape("plain", letters) }); n != 0 {
		t.Errorf("Escape of a kept string allocates %v times", n)
	}
}
