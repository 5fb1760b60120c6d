package redis

import "strings"

// names are the Redis names of one lock. They share the hash tag "{T}", so
// that on a Cluster they live in one slot: one script can use them all, and
// the channel's shard is the lock's. Only the lock's own name is stored (a
// held lease keeps its names); the others are derived from it when used.
type names struct {
	lock string // the lock itself: a hash of its holds (see scripts.go)
}

// fence is the fencing counter, kept without expiry.
func (n names) fence() string { return n.lock + ":fence" }

// channel is where Release publishes, for the key's waiters.
func (n names) channel() string { return n.lock + ":released" }

// waiters is the queue of Drivers waiting for the lock (see scripts.go).
func (n names) waiters() string { return n.lock + ":waiters" }

// namesOf maps a dlock key onto the Redis names of its lock under prefix
// (see "Keys" in the package documentation).
func namesOf(prefix, key string) names {
	return names{lock: prefix + "{" + escapeTag(key) + "}"}
}

// escapeTag returns key with '%', '{' and '}' percent-escaped, and every other
// byte unchanged. The result contains no brace, so it is exactly the hash tag
// when put between braces; and the map is injective, because the escapes
// form a prefix-free code with the bytes they replace ('%' itself escaped).
func escapeTag(key string) string {
	if !strings.ContainsAny(key, "%{}") {
		return key // the common case: readable, and no allocation
	}
	var b strings.Builder
	b.Grow(len(key) + 8)
	for i := 0; i < len(key); i++ {
		switch c := key[i]; c {
		case '%':
			b.WriteString("%25")
		case '{':
			b.WriteString("%7B")
		case '}':
			b.WriteString("%7D")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
