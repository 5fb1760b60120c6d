package redis

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// hostileKeys are keys that would break a naive mapping: braces (the
// Cluster hash tag), the escape character and escapes of braces, protocol
// bytes, NUL, invalid UTF-8, and the longest key the core accepts.
func hostileKeys() []string {
	long := bytes.Repeat([]byte("{}%"), 342)[:1024]
	bin := make([]byte, 1024)
	for i := range bin {
		bin[i] = byte(i * 7)
	}
	return []string{
		"a", "a{b}", "a{b", "a}b", "{", "}", "{}", "}{", "{a}", "a{}",
		"%", "%25", "%7B", "%7D", "a%7Bb%7D", "%{", "{%",
		"a}:fence", "a:fence", "a}:released", "a:released",
		"line\r\nSET x y\r\n", "\x00", "a\x00b", "\xff\xfe\xfd", "\xc3",
		" ", "../..", "dlock:{a}",
		string(long), string(bin), strings.Repeat("k", 1024),
	}
}

// unescapeTag undoes escapeTag; it exists to prove escapeTag injective.
func unescapeTag(tag string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(tag); i++ {
		if tag[i] != '%' {
			b.WriteByte(tag[i])
			continue
		}
		if i+3 > len(tag) {
			return "", false
		}
		switch tag[i : i+3] {
		case "%25":
			b.WriteByte('%')
		case "%7B":
			b.WriteByte('{')
		case "%7D":
			b.WriteByte('}')
		default:
			return "", false
		}
		i += 2
	}
	return b.String(), true
}

// clusterHashTag returns the part of name Redis Cluster hashes: the content
// of the first {...} when it is not empty, else the whole name.
func clusterHashTag(name string) string {
	open := strings.IndexByte(name, '{')
	if open < 0 {
		return name
	}
	end := strings.IndexByte(name[open+1:], '}')
	if end <= 0 {
		return name
	}
	return name[open+1 : open+1+end]
}

func checkMapping(t *testing.T, key string) {
	t.Helper()
	tag := escapeTag(key)
	if strings.ContainsAny(tag, "{}") {
		t.Fatalf("escapeTag(%q) = %q contains a brace", key, tag)
	}
	if back, ok := unescapeTag(tag); !ok || back != key {
		t.Fatalf("escapeTag(%q) = %q, which decodes to %q (%v)", key, tag, back, ok)
	}
	if !strings.ContainsAny(key, "%{}") && tag != key {
		t.Fatalf("escapeTag(%q) = %q, want the key unchanged", key, tag)
	}
	n := namesOf(DefaultKeyPrefix, key)
	for _, name := range []string{n.lock, n.fence(), n.channel(), n.waiters()} {
		if got := clusterHashTag(name); got != tag {
			t.Fatalf("name %q of key %q hashes on %q, want %q", name, key, got, tag)
		}
	}
}

func TestKeyMapping(t *testing.T) {
	seen := map[string]string{} // Redis name -> the key it belongs to
	for _, key := range hostileKeys() {
		checkMapping(t, key)
		n := namesOf(DefaultKeyPrefix, key)
		for _, name := range []string{n.lock, n.fence(), n.channel(), n.waiters()} {
			if other, dup := seen[name]; dup {
				t.Fatalf("keys %q and %q share the Redis name %q", other, key, name)
			}
			seen[name] = key
		}
	}
	n := namesOf(DefaultKeyPrefix, "reports/nightly")
	if got, want := []string{n.lock, n.fence(), n.channel(), n.waiters()}, []string{
		"dlock:{reports/nightly}",
		"dlock:{reports/nightly}:fence",
		"dlock:{reports/nightly}:released",
		"dlock:{reports/nightly}:waiters",
	}; !slices.Equal(got, want) {
		t.Fatalf("names of reports/nightly = %q, want %q", got, want)
	}
	if got := namesOf("", "a{b}%").lock; got != "{a%7Bb%7D%25}" {
		t.Fatalf("lock name of a{b}%% with no prefix = %q", got)
	}
}

func FuzzKeyMapping(f *testing.F) {
	for _, k := range hostileKeys() {
		f.Add(k, "x"+k)
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if a == "" || b == "" {
			return
		}
		checkMapping(t, a)
		checkMapping(t, b)
		na, nb := namesOf(DefaultKeyPrefix, a), namesOf(DefaultKeyPrefix, b)
		if a != b {
			for _, x := range []string{na.lock, na.fence(), na.channel()} {
				for _, y := range []string{nb.lock, nb.fence(), nb.channel()} {
					if x == y {
						t.Fatalf("keys %q and %q share the Redis name %q", a, b, x)
					}
				}
			}
		}
	})
}

func TestMillisRoundsUp(t *testing.T) {
	for _, c := range []struct {
		ttl  time.Duration
		want string
	}{
		{10 * time.Millisecond, "10"},
		{10*time.Millisecond + time.Nanosecond, "11"},
		{10500 * time.Microsecond, "11"},
		{15 * time.Second, "15000"},
		{30 * 24 * time.Hour, "2592000000"},
	} {
		if got := millis(c.ttl); got != c.want {
			t.Errorf("millis(%v) = %s, want %s", c.ttl, got, c.want)
		}
	}
}

func TestOptions(t *testing.T) {
	rdb := offlineRDB()
	defer rdb.Close()
	for _, p := range []string{"a{", "}", "{x}"} {
		if _, err := New(rdb, WithKeyPrefix(p)); !errors.Is(err, dlock.ErrInvalidOption) {
			t.Errorf("WithKeyPrefix(%q): got %v, want ErrInvalidOption", p, err)
		}
	}
	for _, p := range []string{"", "app:", "a b\x00"} {
		d, err := New(rdb, WithKeyPrefix(p))
		if err != nil {
			t.Fatalf("WithKeyPrefix(%q): %v", p, err)
		}
		if d.prefix != p {
			t.Errorf("WithKeyPrefix(%q): prefix %q", p, d.prefix)
		}
		_ = d.Close()
	}
	d, err := New(rdb, nil)
	if err != nil || d.prefix != DefaultKeyPrefix {
		t.Fatalf("New with no option: %v, prefix %q", err, d.prefix)
	}
	caps := d.Capabilities()
	if caps.CheckKey != nil || caps.MinTTL != 0 || caps.MaxTTL != 0 {
		t.Errorf("Capabilities: key or TTL rules of its own (CheckKey %v, MinTTL %v, MaxTTL %v), want the core's", caps.CheckKey != nil, caps.MinTTL, caps.MaxTTL)
	}
	_ = d.Close()
	if _, err := New(nil); err == nil {
		t.Error("New(nil): want an error")
	}
	if !caps.Shared || !caps.Reentrant {
		t.Error("Driver does not report read-write and reentrant locks")
	}
	if caps.Blocking || caps.TokenBlock != tokenBlock || caps.Notifier == nil || caps.BatchExtender == nil || caps.Transferer == nil || caps.Inspector == nil {
		t.Errorf("Capabilities = %+v, want Notifier, BatchExtender, Transferer, Inspector and TokenBlock %d, not Blocking", caps, tokenBlock)
	}
}
