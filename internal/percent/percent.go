// Package percent escapes a byte string for a backend's names: every byte
// the driver does not keep becomes "%XX", two upper-case hex digits. As long
// as keep refuses '%', the escape is injective (percent-decoding gives the
// string back), which is what keeps two dlock keys from sharing a name.
// Which bytes are kept is each driver's choice, written beside its key
// layout.
package percent

import "strings"

// Escape returns s with every byte for which keep is false written as %XX.
// A string whose bytes are all kept comes back as it is, without
// allocating.
func Escape(s string, keep func(byte) bool) string {
	i := 0
	for i < len(s) && keep(s[i]) {
		i++
	}
	if i == len(s) {
		return s
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for ; i < len(s); i++ {
		c := s[i]
		if keep(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}
