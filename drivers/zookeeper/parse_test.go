package zookeeper

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/internal/testkit"
)

// splitParseNode is parseNode as it was written first, with strings.Split:
// the reference that the allocation-free parser must agree with.
func splitParseNode(name string) (node, bool) {
	parts := strings.Split(name, "-")
	if len(parts) == 3 && parts[0] == string(kindEntry) && parts[1] != "" && parts[2] != "" {
		return node{name: name, kind: kindEntry, id: parts[1], tag: parts[2]}, true
	}
	if len(parts) == 4 && (parts[0] == string(kindWriter) || parts[0] == string(kindReader)) && parts[1] != "" {
		if seq, ok := parseSeq(parts[3]); ok {
			return node{name: name, kind: parts[0][0], id: parts[1], tag: parts[2], seq: seq}, true
		}
	}
	if i := strings.LastIndexFunc(name, func(r rune) bool { return r < '0' || r > '9' }); len(name)-i-1 == 10 {
		if seq, ok := parseSeq(name[i+1:]); ok {
			return node{name: name, kind: kindWriter, seq: seq, foreign: true}, true
		}
	}
	return node{}, false
}

// TestParseNodeAgrees: parseNode reads every name as the strings.Split
// parser did, over names built from the pieces node names are made of,
// malformed ones included.
func TestParseNodeAgrees(t *testing.T) {
	pieces := []string{"", "w", "r", "e", "x", "id", testkit.NewID(), ownerTag("o"), "0000000007", "000000007", "+000000007", "00000000070", "lock", "_c_abc"}
	var names []string
	var build func(prefix string, depth int)
	build = func(prefix string, depth int) {
		names = append(names, prefix)
		if depth == 5 {
			return
		}
		for _, p := range pieces {
			next := p
			if depth > 0 {
				next = prefix + "-" + p
			}
			build(next, depth+1)
		}
	}
	build("", 0)
	for _, name := range names {
		got, ok := parseNode(name)
		want, wantOK := splitParseNode(name)
		if got != want || ok != wantOK {
			t.Fatalf("parseNode(%q) = %+v, %v; the Split parser says %+v, %v", name, got, ok, want, wantOK)
		}
	}
	t.Logf("%d names", len(names))
}

// listingOf64 is a listing as a waiter sees it with 64 clients queued.
func listingOf64() []string {
	names := make([]string, 64)
	for i := range names {
		names[i] = fmt.Sprintf("%s%010d", queuePrefix(kindWriter, testkit.NewID(), ""), 1000+(i*37)%64)
	}
	return names
}

// TestListingAllocations pins a listing's cost: one allocation (the queue)
// when no reentrant hold has entries, however long the queue. Every waiter
// parses one at each wake-up.
func TestListingAllocations(t *testing.T) {
	names := listingOf64()
	if n := testing.AllocsPerRun(100, func() { _ = parseListing(names) }); n > 1 {
		t.Errorf("parseListing of 64 queue nodes: %v allocations, want 1", n)
	}
}

func BenchmarkParseListing64(b *testing.B) {
	names := listingOf64()
	b.ReportAllocs()
	for b.Loop() {
		_ = parseListing(names)
	}
}
