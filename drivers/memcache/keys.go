package memcache

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
)

// Limits of the names the driver derives from dlock keys (see "Keys" in the
// package documentation).
const (
	// maxKeyLen is memcached's limit on a key, in bytes.
	maxKeyLen = 250
	// maxPrefixLen bounds the key prefix so that every derived name fits in
	// maxKeyLen: prefix + readable part + '#' + hash + the longest suffix
	// (servedSuffix).
	maxPrefixLen = 64
	// readableLen is how many bytes of the dlock key are kept, sanitised,
	// in front of the hash, for people reading `stats cachedump` or logs.
	readableLen = 64
	// fenceSuffix marks the fencing counter's name. The hash before it is
	// base64url, which has no '.', so no lock name ends with it.
	fenceSuffix = ".fence"

	// nextSuffix and servedSuffix name the counters of the line of
	// waiters (queue.go); no lock name ends with them either.
	nextSuffix   = ".next"
	servedSuffix = ".served"
)

// hashLen is the length of the unpadded base64url SHA-256 in every name.
var hashLen = base64.RawURLEncoding.EncodedLen(sha256.Size)

// names are the memcached keys of one lock.
type names struct {
	lock  string // the lock item: the holder's value, expiring with the lease
	fence string // the fencing counter, stored without expiry

	next, served string // the line's ticket and served counters (queue.go)
}

// namesOf maps the dlock key onto memcached keys under prefix:
//
//	lock:  PREFIX + READABLE + "#" + base64url(SHA-256(key))
//	fence: the lock's name + ".fence"
//
// READABLE is the key's first readableLen bytes with every byte outside
// [A-Za-z0-9._/:-] replaced by '_'. The names are at most 64+64+1+43+6 = 178
// bytes of printable ASCII without spaces, whatever the key holds, so no key
// can inject a command; and they are distinct for distinct (prefix, key)
// pairs as long as SHA-256 has no collision: equal names end in equal hashes,
// hence equal keys, hence equal readable parts, hence equal prefixes.
func namesOf(prefix, key string) names {
	sum := sha256.Sum256([]byte(key))
	n := min(len(key), readableLen)
	b := make([]byte, 0, len(prefix)+n+1+hashLen+len(fenceSuffix))
	b = append(b, prefix...)
	for i := range n {
		b = append(b, readable(key[i]))
	}
	b = append(b, '#')
	b = base64.RawURLEncoding.AppendEncode(b, sum[:])
	lock := string(b)
	return names{lock: lock, fence: lock + fenceSuffix, next: lock + nextSuffix, served: lock + servedSuffix}
}

// readable returns c if it is safe and plain in a memcached key, '_' otherwise.
func readable(c byte) byte {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return c
	case c == '.', c == '_', c == '/', c == ':', c == '-':
		return c
	}
	return '_'
}

// checkPrefix reports why prefix cannot start memcached keys, or nil. A
// prefix may be empty; otherwise it is printable ASCII without spaces
// (memcached's key syntax) and at most maxPrefixLen bytes.
func checkPrefix(prefix string) error {
	if len(prefix) > maxPrefixLen {
		return fmt.Errorf("%d bytes, the limit is %d", len(prefix), maxPrefixLen)
	}
	for i := 0; i < len(prefix); i++ {
		if c := prefix[i]; c <= ' ' || c >= 0x7f {
			return fmt.Errorf("%q has byte %#02x at %d; memcached keys take printable ASCII without spaces", prefix, c, i)
		}
	}
	return nil
}
