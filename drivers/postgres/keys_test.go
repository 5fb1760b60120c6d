package postgres

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

func TestKeyIDMatchesSQL(t *testing.T) {
	c := rawConn(t)
	for _, key := range []string{"a", "reports/nightly", "日本語", strings.Repeat("x", 1024), "a b\r\n"} {
		got := queryText(t, c, fmt.Sprintf(
			"SELECT (('x' || left(encode(sha256(convert_to(%s, 'UTF8')), 'hex'), 16))::bit(64)::bigint)::text",
			quoteLiteral(key)))
		if want := fmt.Sprint(KeyID(key)); got != want {
			t.Errorf("KeyID(%q) = %s, the documented SQL says %s", key, want, got)
		}
	}
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func TestKeyID(t *testing.T) {
	// First 8 bytes of SHA-256("a"): ca978112ca1bbdca.
	if got, want := KeyID("a"), int64(-0x3568_7eed_35e4_4236); got != want {
		t.Errorf("KeyID(\"a\") = %d, want %d", got, want)
	}
	for _, id := range []int64{0, 1, -1, 42, math.MaxInt64, math.MinInt64} {
		key := AdvisoryKey(id)
		if got := KeyID(key); got != id {
			t.Errorf("KeyID(AdvisoryKey(%d)) = %d", id, got)
		}
		if err := validateKey(key); err != nil {
			t.Errorf("validateKey(AdvisoryKey(%d)): %v", id, err)
		}
	}
	for _, bad := range []string{explicitPrefix, explicitPrefix + "01", explicitPrefix + "-0", explicitPrefix + "+5", explicitPrefix + " 5", explicitPrefix + "9223372036854775808"} {
		if err := validateKey(bad); err == nil {
			t.Errorf("validateKey(%q) accepted a malformed explicit key", bad)
		}
	}
	for _, ok := range []string{"", "a", "\x00", "\x00pg-advisory-key", "pg-advisory-key:5"} {
		if err := validateKey(ok); err != nil {
			t.Errorf("validateKey(%q): %v", ok, err)
		}
	}
}

func TestDerivedKeysDistinct(t *testing.T) {
	seen := map[int64]string{}
	add := func(name string, v int64) {
		if prev, dup := seen[v]; dup {
			t.Errorf("%s and %s share advisory key %d", prev, name, v)
		}
		seen[v] = name
	}
	for _, key := range []string{"k", "k2", ""} {
		for _, owner := range []string{"a", "b"} {
			for _, shared := range []bool{false, true} {
				k := keysOf(key, owner, shared)
				add(fmt.Sprintf("group(%q,%q,%v)", key, owner, shared), k.group)
				add(fmt.Sprintf("gate(%q,%q,%v)", key, owner, shared), k.gate)
			}
		}
		k := keysOf(key, "", false)
		add(fmt.Sprintf("main(%q)", key), k.main)
		add(fmt.Sprintf("ownerGroups(%q)", key), k.ownerGroups)
		add(fmt.Sprintf("sharedOwner(%q)", key), k.sharedOwner)
	}
	// Length prefixes keep ("ab", "c") and ("a", "bc") apart.
	if derivedKey(roleOwnerGroup, "ab", "c") == derivedKey(roleOwnerGroup, "a", "bc") {
		t.Error("derived keys of (ab, c) and (a, bc) collide")
	}
}
