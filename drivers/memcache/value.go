package memcache

import (
	"bytes"
	"encoding/base64"
	"strconv"
	"time"
)

// Lock item values. Every one starts with a tag, so that a value written by
// something else is never mistaken for a holder's, and ends with the
// holder's request ID, so that no ID (whatever bytes it holds) can be
// confused with the fields before it. Two forms:
//
//	dlock1:EXPIRES:ID
//	dlock2:EXPIRES:TOKEN:VALUE:ID
//
// EXPIRES is when the holder expects the server to drop the item unless
// renewed (Unix milliseconds, by the holder's clock): only a hint for
// waiters (see lockedError); ownership is the ID alone. TOKEN is the
// grant's fencing token in decimal, 0 while it is not drawn yet; VALUE is
// the hold's Request.Value in unpadded base64url (so it holds no ':'),
// empty when there is none. The driver writes the first form while it has
// neither a token nor a value to record (a plain lock, from its add to its
// first renewal), which is also the only form of the driver's earlier
// versions: those read a dlock2 item as someone else's, which it is to
// them, and the first form still parses here.
const (
	valueTag  = "dlock1:"
	value2Tag = "dlock2:"
)

// holding is what a lock item's value says of its hold.
type holding struct {
	id      string
	expires time.Time
	token   uint64 // 0 until the grant's token is recorded
	value   string // the hold's Request.Value
}

// encodeValue is the lock item's value for h:
//
//	dlock1:1767225600000:0123456789abcdef0123456789abcdef
//	dlock2:1767225600000:1767225600000016:bGVhZGVyLTE:0123456789abcdef0123456789abcdef
func encodeValue(h holding) []byte {
	if h.token == 0 && h.value == "" {
		b := make([]byte, 0, len(valueTag)+14+len(h.id))
		b = append(b, valueTag...)
		b = strconv.AppendInt(b, h.expires.UnixMilli(), 10)
		b = append(b, ':')
		return append(b, h.id...)
	}
	b := make([]byte, 0, len(value2Tag)+14+21+base64.RawURLEncoding.EncodedLen(len(h.value))+len(h.id))
	b = append(b, value2Tag...)
	b = strconv.AppendInt(b, h.expires.UnixMilli(), 10)
	b = append(b, ':')
	b = strconv.AppendUint(b, h.token, 10)
	b = append(b, ':')
	b = base64.RawURLEncoding.AppendEncode(b, []byte(h.value))
	b = append(b, ':')
	return append(b, h.id...)
}

// parseValue takes a lock item's value apart, in either form. ok is false
// for a value the driver did not write.
func parseValue(v []byte) (h holding, ok bool) {
	rest, v2 := bytes.CutPrefix(v, []byte(value2Tag))
	if !v2 {
		var found bool
		if rest, found = bytes.CutPrefix(v, []byte(valueTag)); !found {
			return holding{}, false
		}
	}
	ms, rest, found := bytes.Cut(rest, []byte(":"))
	if !found {
		return holding{}, false
	}
	n, err := strconv.ParseInt(string(ms), 10, 64)
	if err != nil {
		return holding{}, false
	}
	h.expires = time.UnixMilli(n)
	if v2 {
		var token, value []byte
		if token, rest, found = bytes.Cut(rest, []byte(":")); !found {
			return holding{}, false
		}
		if h.token, err = strconv.ParseUint(string(token), 10, 64); err != nil {
			return holding{}, false
		}
		if value, rest, found = bytes.Cut(rest, []byte(":")); !found {
			return holding{}, false
		}
		decoded, err := base64.RawURLEncoding.DecodeString(string(value))
		if err != nil {
			return holding{}, false
		}
		h.value = string(decoded)
	}
	h.id = string(rest)
	return h, true
}

// heldBy reports whether the lock item's value names id as its holder.
func heldBy(v []byte, id string) bool {
	h, ok := parseValue(v)
	return ok && h.id == id
}
