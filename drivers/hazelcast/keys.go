package hazelcast

import (
	"strings"
	"unicode/utf8"
)

// mapKey returns the key of the Hazelcast map entries that stand for the
// dlock key k: the entry whose lock is the lock, and the entry of the fencing
// map that holds its counter.
//
// Map keys are Java strings. The Go client sends a string's bytes as they
// are, and members compare keys by those bytes, so any Go string would do as
// long as nothing deserializes it; but a key that is not valid UTF-8 turns
// into replacement characters wherever a member, Management Center or a Java
// client does read it, and two such keys would then look alike. So every byte
// of an invalid UTF-8 sequence is written as "%XX" (two upper-case hex
// digits), and '%' itself as "%25". The mapping is injective: each escape
// starts with '%', and a '%' of the key always becomes an escape. Valid UTF-8
// keys without '%' are unchanged, which keeps them readable.
func mapKey(k string) string {
	if utf8.ValidString(k) && !strings.Contains(k, "%") {
		return k
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(k) + 8)
	for i := 0; i < len(k); {
		r, size := utf8.DecodeRuneInString(k[i:])
		switch {
		case r == utf8.RuneError && size == 1: // a byte of an invalid sequence
			b.WriteByte('%')
			b.WriteByte(hex[k[i]>>4])
			b.WriteByte(hex[k[i]&0xF])
		case r == '%':
			b.WriteString("%25")
		default:
			b.WriteString(k[i : i+size])
		}
		i += size
	}
	return b.String()
}
