package postgres

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
)

// explicitPrefix starts the dlock keys that name a PostgreSQL advisory key
// directly (see [AdvisoryKey]). It begins with a NUL byte so that it cannot
// clash with a readable name.
const explicitPrefix = "\x00pg-advisory-key:"

// AdvisoryKey returns the dlock key that locks exactly the PostgreSQL
// advisory key id (the bigint that pg_advisory_lock takes), instead of a key
// hashed from a name. Use it to interoperate with code that takes advisory
// locks itself: a dlock Mutex on AdvisoryKey(42) excludes
// pg_advisory_lock(42) in any other session, and the reverse. The returned
// string is "\x00pg-advisory-key:" followed by id in decimal.
func AdvisoryKey(id int64) string {
	return explicitPrefix + strconv.FormatInt(id, 10)
}

// KeyID returns the PostgreSQL advisory key (the bigint of
// pg_advisory_lock) that the driver locks for the dlock key key: id itself
// for a key made by [AdvisoryKey], and otherwise the first 8 bytes of
// SHA-256(key), read as a big-endian two's-complement int64. The SQL
// equivalent for a key given as text is
//
//	('x' || left(encode(sha256(convert_to(key, 'UTF8')), 'hex'), 16))::bit(64)::bigint
//
// It is meant for operators and tests (to find a lock's holder in pg_locks,
// whose classid and objid columns hold the high and low 32 bits of the key,
// as unsigned numbers, with objsubid 1). A key that starts with the
// AdvisoryKey prefix but is not exactly what AdvisoryKey makes is refused by
// the driver, and KeyID hashes it like any other name.
func KeyID(key string) int64 {
	if id, ok := explicitID(key); ok {
		return id
	}
	return hashKey(key)
}

func hashKey(key string) int64 {
	sum := sha256.Sum256([]byte(key))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// explicitID parses a key made by AdvisoryKey. Only the canonical form is
// accepted (no sign on positive numbers, no leading zeros), so that two
// different keys never name the same advisory key.
func explicitID(key string) (int64, bool) {
	digits, ok := strings.CutPrefix(key, explicitPrefix)
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || strconv.FormatInt(id, 10) != digits {
		return 0, false
	}
	return id, true
}

// errBadExplicitKey is CheckKey's answer for a key that looks like an
// AdvisoryKey but is not one.
var errBadExplicitKey = errors.New(`keys starting with "\x00pg-advisory-key:" must be made by postgres.AdvisoryKey (a decimal int64 in canonical form)`)

func validateKey(key string) error {
	if strings.HasPrefix(key, explicitPrefix) {
		if _, ok := explicitID(key); !ok {
			return errBadExplicitKey
		}
	}
	return nil
}

// Roles of the derived advisory keys that shared and reentrant locks use
// beside a lock's own key (see "Keys" in the package documentation).
const (
	roleOwnerGroups       = "exclusive-owner-groups" // held shared by every member of any exclusive owner group
	roleSharedOwnerGroups = "shared-owner-groups"    // held shared by every member of any shared owner group
	roleOwnerGroup        = "exclusive-owner-group"  // held shared by the members of one owner's exclusive group
	roleSharedOwnerGroup  = "shared-owner-group"     // held shared by the members of one owner's shared group
	roleOwnerGate         = "exclusive-owner-gate"   // serialises one owner's joins to its exclusive group
	roleSharedOwnerGate   = "shared-owner-gate"      // serialises one owner's joins to its shared group
)

// derivedKey returns the advisory key of role for the lock key (and owner):
// the first 8 bytes of SHA-256 over "dlock", role, key and owner, each
// preceded by its length, so that no two (role, key, owner) share an input.
func derivedKey(role, key, owner string) int64 {
	h := sha256.New()
	for _, part := range []string{"dlock", role, key, owner} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write([]byte(part))
	}
	var sum [sha256.Size]byte
	return int64(binary.BigEndian.Uint64(h.Sum(sum[:0])[:8]))
}

// lockKeys are the advisory keys one request uses.
type lockKeys struct {
	main        int64 // the lock itself: held by plain exclusive and shared locks
	ownerGroups int64 // roleOwnerGroups of the key
	sharedOwner int64 // roleSharedOwnerGroups of the key
	group       int64 // the owner's group (exclusive or shared), owner requests only
	gate        int64 // the owner's gate, owner requests only
}

func keysOf(key, owner string, shared bool) lockKeys {
	k := lockKeys{
		main:        KeyID(key),
		ownerGroups: derivedKey(roleOwnerGroups, key, ""),
		sharedOwner: derivedKey(roleSharedOwnerGroups, key, ""),
	}
	if owner != "" {
		group, gate := roleOwnerGroup, roleOwnerGate
		if shared {
			group, gate = roleSharedOwnerGroup, roleSharedOwnerGate
		}
		k.group = derivedKey(group, key, owner)
		k.gate = derivedKey(gate, key, owner)
	}
	return k
}
