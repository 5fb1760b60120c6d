package memcache

import (
	"strings"
	"testing"
	"time"
)

func TestValueRoundTrip(t *testing.T) {
	at := time.UnixMilli(1767225600123)
	for _, id := range []string{"0123456789abcdef0123456789abcdef", "", "with:colons:in:it", "with space", "\x00\xff"} {
		v := encodeValue(id, at)
		got, expires, ok := parseValue(v)
		if !ok || got != id || !expires.Equal(at) {
			t.Errorf("parseValue(encodeValue(%q)) = %q, %v, %v", id, got, expires, ok)
		}
		if !heldBy(v, id) || heldBy(v, id+"x") {
			t.Errorf("heldBy(%q) wrong", v)
		}
	}
	if want := "dlock1:1767225600123:abc"; string(encodeValue("abc", at)) != want {
		t.Errorf("encodeValue = %q, want %q", encodeValue("abc", at), want)
	}
	for _, v := range []string{"", "abc", "dlock1:", "dlock1:x:abc", "dlock1:123", "dlock2:1:abc", "DLOCK1:1:abc"} {
		if _, _, ok := parseValue([]byte(v)); ok {
			t.Errorf("parseValue(%q) accepted a value the driver did not write", v)
		}
		if heldBy([]byte(v), "abc") {
			t.Errorf("heldBy(%q, abc) = true", v)
		}
	}
}

func FuzzParseValue(f *testing.F) {
	f.Add([]byte("dlock1:1767225600123:abc"))
	f.Add([]byte("dlock1:-1:"))
	f.Fuzz(func(t *testing.T, v []byte) {
		id, expires, ok := parseValue(v)
		if !ok {
			return
		}
		if again := encodeValue(id, expires); !strings.HasPrefix(string(v), valueTag) || !heldBy(again, id) {
			t.Fatalf("parseValue(%q) = %q, %v: does not round-trip", v, id, expires)
		}
	})
}
