package zookeeper

import (
	"net/url"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/internal/testkit"
)

// unescape is escapeKey's inverse: that one exists is what makes escapeKey
// injective.
func unescape(t testing.TB, name string) string {
	t.Helper()
	key, err := url.PathUnescape(name)
	if err != nil {
		t.Fatalf("escaped name %q does not unescape: %v", name, err)
	}
	return key
}

// validName reports whether name is a single node name ZooKeeper accepts.
func validName(name string) bool {
	// "zookeeper" is reserved only at the root, where locks never are.
	if name == "" || name == "." || name == ".." {
		return false
	}
	for _, r := range name {
		if r == '/' || r < 0x20 || 0x7f <= r && r <= 0x9f || 0xd800 <= r && r <= 0xf8ff || 0xfff0 <= r && r <= 0xffff {
			return false
		}
	}
	return true
}

func TestEscapeKey(t *testing.T) {
	for key, want := range map[string]string{
		"reports/nightly": "reports%2Fnightly",
		".":               "%2E",
		"..":              "%2E%2E",
		"/zookeeper":      "%2Fzookeeper",
		"%2F":             "%252F",
		"a b\r\n\x00":     "a%20b%0D%0A%00",
		"日":               "%E6%97%A5",
		"A-z_0~9":         "A-z_0~9",
	} {
		if got := escapeKey(key); got != want {
			t.Errorf("escapeKey(%q) = %q, want %q", key, got, want)
		}
	}
	if got := len(escapeKey(strings.Repeat("\xff", 1024))); got != 3072 {
		t.Errorf("longest escaped key: %d bytes, want 3072", got)
	}
}

func FuzzEscapeKey(f *testing.F) {
	for _, k := range []string{"", "a", "/", "..", "%", "%25", "\xff\xfe", "a/b/../c", "zookeeper"} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		name := escapeKey(key)
		if key != "" && !validName(name) {
			t.Fatalf("escapeKey(%q) = %q, not a valid node name", key, name)
		}
		if back := unescape(t, name); back != key {
			t.Fatalf("escapeKey(%q) = %q, which unescapes to %q: not injective", key, name, back)
		}
	})
}

func TestCheckBase(t *testing.T) {
	for _, good := range []string{"/dlock", "/a/b/c", "/apps/billing-locks", "/日本"} {
		if err := checkBase(good); err != nil {
			t.Errorf("checkBase(%q): %v, want nil", good, err)
		}
	}
	for _, bad := range []string{"", "dlock", "/", "/zookeeper", "/zookeeper/x", "/a/", "//a", "/a//b", "/a/./b", "/a/..", "/a\x00b", "/a\x1fb", "/\xff", "/a\u0085"} {
		if err := checkBase(bad); err == nil {
			t.Errorf("checkBase(%q) = nil, want an error", bad)
		}
	}
}

func TestParseNode(t *testing.T) {
	id, tag := testkit.NewID(), ownerTag("owner")
	for name, want := range map[string]node{
		queuePrefix(kindWriter, id, "") + "0000000007":  {kind: kindWriter, id: id, seq: 7},
		queuePrefix(kindReader, id, tag) + "0000000012": {kind: kindReader, id: id, tag: tag, seq: 12},
		entryName(id, "anchor"):                         {kind: kindEntry, id: id, tag: "anchor"},
		"lock-0000000003":                               {kind: kindWriter, seq: 3, foreign: true},
		"_c_abc-lock-0000000004":                        {kind: kindWriter, seq: 4, foreign: true},
	} {
		got, ok := parseNode(name)
		want.name = name
		if !ok || got != want {
			t.Errorf("parseNode(%q) = %+v, %v, want %+v", name, got, ok, want)
		}
	}
	for _, name := range []string{"x", "w-", "w-id--12", "lock", "e-only", "lock-123"} {
		if n, ok := parseNode(name); ok {
			t.Errorf("parseNode(%q) = %+v, want no node", name, n)
		}
	}
}

// queue builds a listing from a compact description: "w1 r2 r3 w4" is a
// writer with ID "1" and sequence 1, and so on, in any order.
func queue(desc string) listing {
	var names []string
	for _, f := range strings.Fields(desc) {
		seq := "000000000" + f[1:]
		names = append(names, string(f[0])+"-"+f[1:]+"--"+seq[len(seq)-10:])
	}
	return parseListing(names)
}

func TestListing(t *testing.T) {
	for _, c := range []struct {
		desc    string
		id      string
		granted bool
		pred    string // the predecessor's ID, when not granted
	}{
		{"w1", "1", true, ""},
		{"w1 w2", "2", false, "1"},
		{"w3 w1 w2", "3", false, "2"}, // order is by sequence, not by listing
		{"r1 r2 r3", "3", true, ""},
		{"r1 w2 r3 r4", "4", false, "2"}, // a reader waits for the last writer ahead
		{"r1 r2 w3", "3", false, "2"},    // a writer waits for the node just ahead
		{"w1 r2 r3 w4 r5", "5", false, "4"},
		{"r1 r2 w3 r4", "2", true, ""},
	} {
		lst := queue(c.desc)
		i := lst.find(c.id)
		if i < 0 {
			t.Fatalf("%s: node %s not found", c.desc, c.id)
		}
		if got := lst.granted(i); got != c.granted {
			t.Errorf("%s: granted(%s) = %v, want %v", c.desc, c.id, got, c.granted)
			continue
		}
		if !c.granted {
			if got := lst.predecessor(i).id; got != c.pred {
				t.Errorf("%s: predecessor of %s = %s, want %s", c.desc, c.id, got, c.pred)
			}
		}
	}
}

func TestHolders(t *testing.T) {
	ids := func(ns []node) string {
		var s []string
		for _, n := range ns {
			s = append(s, n.id)
		}
		return strings.Join(s, " ")
	}
	for _, c := range []struct {
		desc string
		kind byte
		want string
	}{
		{"w1 w2", kindWriter, "1"},
		{"w1 w2", kindReader, ""},
		{"r1 r2 w3 r4", kindReader, "1 2"},
		{"r1 r2 w3 r4", kindWriter, ""},
		{"w1 r2", kindReader, ""},
	} {
		if got := ids(queue(c.desc).holders(c.kind, "", "none")); got != c.want {
			t.Errorf("%s: holders(%c) = %q, want %q", c.desc, c.kind, got, c.want)
		}
	}
}

func TestData(t *testing.T) {
	for _, owner := range []string{"o", "", "a\nb", "\xff\x00", strings.Repeat("x", 1024)} {
		for _, value := range []string{"", "node-1 at 10.0.0.1:8080 ∑", strings.Repeat("v", 256)} {
			in := nodeData{owner: owner, value: value, ids: []string{testkit.NewID(), testkit.NewID()}}
			got, ok := decodeData(encodeData(in))
			if !ok || got.owner != owner || got.value != value || strings.Join(got.ids, ",") != strings.Join(in.ids, ",") {
				t.Errorf("decodeData(encodeData(%+v)) = %+v, %v", in, got, ok)
			}
			if plain := (nodeData{value: value}); value != "" {
				if got, ok := decodeData(encodeData(plain)); !ok || got.owner != "" || got.value != value || len(got.ids) != 0 {
					t.Errorf("decodeData(encodeData(%+v)) = %+v, %v", plain, got, ok)
				}
			}
		}
	}
	if data := encodeData(nodeData{}); data != nil {
		t.Errorf("a plain node without a value carries %q, want no data", data)
	}
	// A reentrant node without a value keeps the form earlier versions
	// wrote, byte for byte, and they still parse.
	if got, want := string(encodeData(nodeData{owner: "o", ids: []string{"a1", "b2"}})), dataMagic+"\nbw\na1\nb2"; got != want {
		t.Errorf("encodeData of a reentrant node = %q, want %q", got, want)
	}
	if got, ok := decodeData([]byte(dataMagic + "\nbw\na1")); !ok || got.owner != "o" || got.value != "" || len(got.ids) != 1 {
		t.Errorf("decodeData of the first form = %+v, %v", got, ok)
	}
	for _, data := range []string{"", "x", dataMagic, dataMagic + "\n!!", dataMagic + "\nbw\nbad-id",
		data2Magic, data2Magic + "\n", data2Magic + "\n\n", data2Magic + "\n\n!!", data2Magic + "\nbw\ndg\nbad-id"} {
		if _, ok := decodeData([]byte(data)); ok {
			t.Errorf("decodeData(%q) ok, want refused", data)
		}
	}
}
