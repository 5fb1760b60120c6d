package memcache

import (
	"strings"
	"testing"
	"time"
)

func TestValueRoundTrip(t *testing.T) {
	at := time.UnixMilli(1767225600123)
	for _, id := range []string{"0123456789abcdef0123456789abcdef", "", "with:colons:in:it", "with space", "\x00\xff"} {
		for _, h := range []holding{
			{id: id, expires: at},
			{id: id, expires: at, token: 1767225600000016},
			{id: id, expires: at, value: "leader: 10.0.0.1:80 ∑"},
			{id: id, expires: at, token: 17, value: "x"},
		} {
			v := encodeValue(h)
			got, ok := parseValue(v)
			if !ok || got.id != h.id || !got.expires.Equal(at) || got.token != h.token || got.value != h.value {
				t.Errorf("parseValue(encodeValue(%+v)) = %+v, %v", h, got, ok)
			}
			if !heldBy(v, id) || heldBy(v, id+"x") {
				t.Errorf("heldBy(%q) wrong", v)
			}
		}
	}
	// A plain hold without a token is written as the driver's earlier
	// versions wrote it (and read it), so they keep reading its expiry.
	if want := "dlock1:1767225600123:abc"; string(encodeValue(holding{id: "abc", expires: at})) != want {
		t.Errorf("encodeValue = %q, want %q", encodeValue(holding{id: "abc", expires: at}), want)
	}
	if want := "dlock2:1767225600123:7:YTpi:abc"; string(encodeValue(holding{id: "abc", expires: at, token: 7, value: "a:b"})) != want {
		t.Errorf("encodeValue = %q, want %q", encodeValue(holding{id: "abc", expires: at, token: 7, value: "a:b"}), want)
	}
	for _, v := range []string{"", "abc", "dlock1:", "dlock1:x:abc", "dlock1:123", "dlock2:1:abc", "DLOCK1:1:abc",
		"dlock2:1:2:abc", "dlock2:1:x:YQ:abc", "dlock2:1:-1:YQ:abc", "dlock2:1:2:Y*:abc", "dlock3:1:abc"} {
		if _, ok := parseValue([]byte(v)); ok {
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
	f.Add([]byte("dlock2:1767225600123:7:YTpi:abc"))
	f.Fuzz(func(t *testing.T, v []byte) {
		h, ok := parseValue(v)
		if !ok {
			return
		}
		again, ok := parseValue(encodeValue(h))
		if !strings.HasPrefix(string(v), "dlock") || !ok || again.id != h.id || again.token != h.token || again.value != h.value || !again.expires.Equal(h.expires) {
			t.Fatalf("parseValue(%q) = %+v: does not round-trip (%+v)", v, h, again)
		}
	})
}
