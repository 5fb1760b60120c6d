package memcache

import (
	"bytes"
	"strconv"
	"time"
)

// valueTag starts every lock item's value, so that a value written by
// something else is never mistaken for a holder's.
const valueTag = "dlock1:"

// encodeValue is the lock item's value: the tag, when the holder expects the
// server to drop the item unless renewed (Unix milliseconds, by the holder's
// clock), and the holder's request ID, last so that no ID can be confused
// with the number:
//
//	dlock1:1767225600000:0123456789abcdef0123456789abcdef
//
// The expiry is only a hint for waiters (see lockedError); ownership is the
// ID alone.
func encodeValue(id string, expires time.Time) []byte {
	b := make([]byte, 0, len(valueTag)+14+len(id))
	b = append(b, valueTag...)
	b = strconv.AppendInt(b, expires.UnixMilli(), 10)
	b = append(b, ':')
	return append(b, id...)
}

// parseValue takes a lock item's value apart. ok is false for a value the
// driver did not write.
func parseValue(v []byte) (id string, expires time.Time, ok bool) {
	rest, found := bytes.CutPrefix(v, []byte(valueTag))
	if !found {
		return "", time.Time{}, false
	}
	ms, idPart, found := bytes.Cut(rest, []byte(":"))
	if !found {
		return "", time.Time{}, false
	}
	n, err := strconv.ParseInt(string(ms), 10, 64)
	if err != nil {
		return "", time.Time{}, false
	}
	return string(idPart), time.UnixMilli(n), true
}

// heldBy reports whether the lock item's value names id as its holder.
func heldBy(v []byte, id string) bool {
	holder, _, ok := parseValue(v)
	return ok && holder == id
}
