package etcd

import (
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/percent"
)

// lockNames are the etcd names of one dlock key (see "Keys" in the package
// documentation). Every name of the key starts with dir, and dir ends with
// '/' after a segment that contains no '/', so the key's names are exactly
// the names that start with dir.
type lockNames struct {
	dir     string // PREFIX/SEGMENT/
	queue   string // dir + "q/": every contender, held or waiting
	writers string // queue + "w/": exclusive contenders
	readers string // queue + "r/": shared contenders
}

func namesOf(prefix, key string) lockNames {
	dir := prefix + "/" + escape(key) + "/"
	q := dir + "q/"
	return lockNames{dir: dir, queue: q, writers: q + "w/", readers: q + "r/"}
}

// kind returns the queue range of mode: writers or readers.
func (n lockNames) kind(mode driver.Mode) string {
	if mode == driver.Shared {
		return n.readers
	}
	return n.writers
}

// contender is the queue entry of one plain (non-reentrant) request: unique
// per request, and tied to the session that made it.
func (n lockNames) contender(mode driver.Mode, session clientv3.LeaseID, id string) string {
	return n.kind(mode) + leaseHex(session) + "-" + escape(id)
}

// ownerHold is the queue entry shared by every request of one owner in one
// mode: its name is derived from the owner alone, so that every client of
// the owner finds it. The '@' keeps it apart from contender names, which
// start with a hex digit.
func (n lockNames) ownerHold(mode driver.Mode, owner string) string {
	return n.kind(mode) + "@" + escape(owner)
}

// members is the range of the entries of the owner hold whose lease is hold:
// one per request that takes part in it, each tied to its own session.
func (n lockNames) members(hold clientv3.LeaseID) string {
	return n.dir + "e/" + leaseHex(hold) + "/"
}

// member is one request's entry in the owner hold whose lease is hold.
func (n lockNames) member(hold, session clientv3.LeaseID, id string) string {
	return n.members(hold) + leaseHex(session) + "-" + escape(id)
}

// blockers is the range of the entries that a request of mode must wait
// for, when their create revision is lower than its own: every entry for an
// exclusive request, the exclusive ones for a shared request.
func (n lockNames) blockers(mode driver.Mode) string {
	if mode == driver.Shared {
		return n.writers
	}
	return n.queue
}

// leaseHex writes a lease ID as unsigned hex: etcd's IDs may have the top
// bit set, and a '-' sign would be taken for the separator after it.
func leaseHex(id clientv3.LeaseID) string {
	return strconv.FormatUint(uint64(id), 16)
}

// escape maps any byte string onto an etcd name segment: printable ASCII
// other than '/', '%' and ' ' stays as it is, every other byte becomes %XX
// (upper-case hex), and a segment that would be "." or ".." is written
// "%2E" or "%2E%2E", so that tools that read names as paths see no
// traversal. The map is injective: percent-decoding the result gives the
// input back.
func escape(s string) string {
	if s == "." || s == ".." {
		return strings.Repeat("%2E", len(s))
	}
	return percent.Escape(s, plain) // most keys come back as they are: readable in etcdctl
}

func plain(c byte) bool {
	return c > ' ' && c < 0x7f && c != '/' && c != '%'
}

// unescape reverses escape; ok is false when s is not an escaped segment.
// Tests use it to prove escape injective.
func unescape(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			if !plain(c) {
				return "", false
			}
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", false
		}
		b.WriteByte(byte(v))
		i += 2
	}
	return b.String(), true
}
