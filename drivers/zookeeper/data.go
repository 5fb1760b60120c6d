package zookeeper

import (
	"encoding/base64"
	"slices"
	"strings"
)

// The data of a queue node made for a reentrant request records the owner and
// the request IDs of the entries held in it:
//
//	dlock-owner/1
//	BASE64URL(OWNER)
//	ID
//	ID...
//
// The first ID is the node's own request's, while that entry is held; every
// other ID has an entry node (e-ID-ANCHOR) of the session that joined, so an
// entry whose client died (its session ended, and its entry node with it) is
// recognised as dead and dropped by the next release. Queue nodes of
// non-reentrant requests carry no data.
const dataMagic = "dlock-owner/1"

func encodeData(owner string, ids []string) []byte {
	var b strings.Builder
	b.WriteString(dataMagic)
	b.WriteByte('\n')
	b.WriteString(base64.RawURLEncoding.EncodeToString([]byte(owner)))
	for _, id := range ids {
		b.WriteByte('\n')
		b.WriteString(id)
	}
	return []byte(b.String())
}

// decodeData parses the data of a reentrant queue node; ok is false for any
// other data (a non-reentrant node, or a node dlock did not write).
func decodeData(data []byte) (owner string, ids []string, ok bool) {
	lines := strings.Split(string(data), "\n")
	if len(lines) < 2 || lines[0] != dataMagic {
		return "", nil, false
	}
	o, err := base64.RawURLEncoding.DecodeString(lines[1])
	if err != nil {
		return "", nil, false
	}
	for _, id := range lines[2:] {
		if checkID(id) != nil {
			return "", nil, false
		}
	}
	return string(o), slices.Clone(lines[2:]), true
}
