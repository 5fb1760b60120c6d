package zookeeper

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dlock-go/dlock/internal/percent"
)

// escapeKey maps a dlock key (any byte string) onto one ZooKeeper node name.
// Bytes in [A-Za-z0-9_~-] are kept; every other byte, '%' included, becomes
// "%XX" (two upper-case hex digits). The mapping is injective, since
// percent-decoding the name gives the key back, and its output is printable
// ASCII without '/' or '.', so it is never "", "." or "..", never a path of
// several nodes, and never contains the characters ZooKeeper forbids
// (control characters, U+007F to U+009F, surrogates, U+F000 to U+F8FF and
// U+FFF0 to U+FFFF). Names are at most three times as long as keys: 3072
// bytes for the core's longest key, well within ZooKeeper's request limit
// (jute.maxbuffer, 1 MiB by default), which is its only limit on names.
func escapeKey(key string) string { return percent.Escape(key, isSafe) }

func isSafe(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '~' || c == '-'
}

// checkBase checks the base path under which a Driver keeps its locks: an
// absolute ZooKeeper path of one or more nodes, not the root, and neither
// /zookeeper nor anything under it (ZooKeeper's own subtree, where clients
// cannot create nodes).
func checkBase(base string) error {
	if base == "" || base[0] != '/' {
		return fmt.Errorf("base path %q is not absolute", base)
	}
	if base == "/" {
		return errors.New(`base path "/" would put locks beside /zookeeper; name a node, e.g. /dlock`)
	}
	if base == "/zookeeper" || strings.HasPrefix(base, "/zookeeper/") {
		return fmt.Errorf("base path %q is inside ZooKeeper's reserved /zookeeper subtree", base)
	}
	if !utf8.ValidString(base) {
		return fmt.Errorf("base path %q is not valid UTF-8", base)
	}
	for _, elem := range strings.Split(base[1:], "/") {
		switch elem {
		case "":
			return fmt.Errorf("base path %q has an empty element (a doubled or trailing '/')", base)
		case ".", "..":
			return fmt.Errorf("base path %q has a %q element, which ZooKeeper does not allow", base, elem)
		}
		for _, r := range elem {
			if r < 0x20 || 0x7f <= r && r <= 0x9f || 0xd800 <= r && r <= 0xf8ff || 0xfff0 <= r && r <= 0xffff {
				return fmt.Errorf("base path %q contains the character %U, which ZooKeeper does not allow", base, r)
			}
		}
	}
	return nil
}

// Lock nodes. Every lock is a directory node, base/ESCAPED-KEY (a container
// node, which ZooKeeper removes once it is empty), whose children are:
//
//	w-ID-TAG-SEQ   a writer (exclusive) in the queue
//	r-ID-TAG-SEQ   a reader (shared) in the queue
//	e-ID-ANCHOR    a reentrant entry held in the queue node whose ID is ANCHOR
//
// ID is the request ID of the acquisition that created the node (the core's
// 128 random bits), which is what lets a client find its own node after a
// lost reply; TAG is empty, or the first 16 hex digits of SHA-256 of the
// request's Owner for reentrant requests; SEQ is the ten-digit sequence
// number ZooKeeper appends. Queue nodes are EPHEMERAL_SEQUENTIAL, entry nodes
// EPHEMERAL: all end with the session that made them.

// Kinds of lock node.
const (
	kindWriter = 'w'
	kindReader = 'r'
	kindEntry  = 'e'
)

// node is one child of a lock directory, parsed from its name.
type node struct {
	name    string
	kind    byte
	id      string
	tag     string // owner tag of a queue node; the anchor's ID for an entry
	seq     int64  // queue nodes only
	foreign bool   // not named by dlock; treated as a writer
}

// maxIDLen bounds request IDs, which become parts of node names.
const maxIDLen = 64

// checkID checks that a request ID can be a part of a node name. The core's
// IDs (32 hex digits) always can.
func checkID(id string) error {
	if id == "" || len(id) > maxIDLen {
		return fmt.Errorf("zookeeper: request ID must be 1 to %d bytes, got %d", maxIDLen, len(id))
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return fmt.Errorf("zookeeper: request ID %q has a byte other than a letter or digit", id)
		}
	}
	return nil
}

// ownerTag is the short name of an owner in node names: enough to find
// candidate nodes of the same owner in a listing without reading each one;
// the owner in the node's data confirms the match.
func ownerTag(owner string) string {
	if owner == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(owner))
	return hex.EncodeToString(sum[:8])
}

// queuePrefix is the name, before ZooKeeper's sequence number, of a queue
// node of kind for request id with owner tag tag.
func queuePrefix(kind byte, id, tag string) string {
	return string(kind) + "-" + id + "-" + tag + "-"
}

// entryName is the name of the entry node of request id in the queue node
// anchored by anchorID.
func entryName(id, anchorID string) string {
	return string(kindEntry) + "-" + id + "-" + anchorID
}

// parseNode parses a child's name. Names dlock did not make count as writers
// when they end in a sequence number (someone holds or queues for the lock
// by hand) and are ignored otherwise.
func parseNode(name string) (node, bool) {
	// The name's fields are split with strings.Cut rather than
	// strings.Split: a waiter parses every child of the lock at each
	// wake-up, and a slice per name was most of a listing's cost.
	if f0, rest, ok := strings.Cut(name, "-"); ok {
		if f1, rest, ok := strings.Cut(rest, "-"); ok {
			f2, f3, four := strings.Cut(rest, "-")
			switch {
			case !four && f0 == string(kindEntry) && f1 != "" && f2 != "":
				return node{name: name, kind: kindEntry, id: f1, tag: f2}, true
			case four && (f0 == string(kindWriter) || f0 == string(kindReader)) && f1 != "" && !strings.Contains(f3, "-"):
				if seq, ok := parseSeq(f3); ok {
					return node{name: name, kind: f0[0], id: f1, tag: f2, seq: seq}, true
				}
			}
		}
	}
	if i := strings.LastIndexFunc(name, func(r rune) bool { return r < '0' || r > '9' }); len(name)-i-1 == 10 {
		if seq, ok := parseSeq(name[i+1:]); ok {
			return node{name: name, kind: kindWriter, seq: seq, foreign: true}, true
		}
	}
	return node{}, false
}

func parseSeq(s string) (int64, bool) {
	if len(s) != 10 {
		return 0, false
	}
	seq, err := strconv.ParseInt(s, 10, 64)
	return seq, err == nil
}

// listing is a lock directory's children, parsed: the queue in order of
// sequence numbers, and the entry nodes.
type listing struct {
	queue   []node
	entries map[string]bool // names of entry nodes; nil when there are none
}

func parseListing(children []string) listing {
	// One allocation for the queue; the map only when a reentrant hold has
	// entries (rare), as this runs at every wake-up of every waiter.
	l := listing{queue: make([]node, 0, len(children))}
	for _, name := range children {
		n, ok := parseNode(name)
		switch {
		case !ok:
		case n.kind == kindEntry:
			if l.entries == nil {
				l.entries = map[string]bool{}
			}
			l.entries[n.name] = true
		default:
			l.queue = append(l.queue, n)
		}
	}
	slices.SortFunc(l.queue, func(a, b node) int {
		switch {
		case a.seq < b.seq:
			return -1
		case a.seq > b.seq:
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	return l
}

// find returns the index of the queue node of request id, or -1.
func (l listing) find(id string) int {
	return slices.IndexFunc(l.queue, func(n node) bool { return !n.foreign && n.id == id })
}

// granted reports whether the queue node at i holds the lock: a writer when
// it is first, a reader when no writer is ahead of it.
func (l listing) granted(i int) bool {
	if l.queue[i].kind == kindWriter {
		return i == 0
	}
	return !slices.ContainsFunc(l.queue[:i], func(n node) bool { return n.kind == kindWriter })
}

// predecessor returns the node that the queue node at i waits for: the one
// just ahead of a writer, the nearest writer ahead of a reader. Watching only
// it means each release wakes only the waiters it lets in (no herd).
func (l listing) predecessor(i int) node {
	if l.queue[i].kind == kindWriter {
		return l.queue[i-1]
	}
	for j := i - 1; j >= 0; j-- {
		if l.queue[j].kind == kindWriter {
			return l.queue[j]
		}
	}
	panic("zookeeper: predecessor of a granted reader")
}

// holders returns the queue nodes that hold the lock in mode kind and carry
// owner tag tag, other than the node of request id: the candidates for a
// reentrant request to join.
func (l listing) holders(kind byte, tag, id string) []node {
	var out []node
	for i, n := range l.queue {
		// The holders are the first node if it is a writer, or else the
		// readers ahead of the first writer.
		if n.kind == kindWriter && i > 0 {
			break
		}
		if n.kind == kind && !n.foreign && n.tag == tag && n.id != id {
			out = append(out, n)
		}
		if n.kind == kindWriter {
			break
		}
	}
	return out
}
