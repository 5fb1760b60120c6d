package zookeeper

import (
	"encoding/base64"
	"slices"
	"strings"
)

// The data of a queue node says what the hold is, in one of three forms.
//
// A node of a plain request without a value carries no data.
//
// A node of a reentrant request without a value records the owner and the
// request IDs of the entries held in it:
//
//	dlock-owner/1
//	BASE64URL(OWNER)
//	ID
//	ID...
//
// The first ID is the node's own request's, while that entry is held; every
// other ID has an entry node (e-ID-ANCHOR) of the session that joined, so an
// entry whose client died (its session ended, and its entry node with it) is
// recognised as dead and dropped by the next release.
//
// A node of a request with a Value (a leader election's candidate) records
// it, and for a reentrant request the owner and entries as above:
//
//	dlock-hold/2
//	BASE64URL(OWNER)   (empty for a plain request)
//	BASE64URL(VALUE)
//	ID...              (reentrant requests only)
//
// The value is written with the node, by the create that queues it, so it is
// there from the moment the node can hold the lock, beside the node's
// creating zxid, its fencing token: one read of the node gives both. A
// reentrant hold keeps the value of the request that created its node
// while entries join and leave. Nodes without a value keep the earlier
// forms, which the driver's earlier versions read (they cannot join a
// reentrant hold of the second form, which the core never asks for: an
// election is not reentrant).
const (
	dataMagic  = "dlock-owner/1"
	data2Magic = "dlock-hold/2"
)

// nodeData is what a queue node's data says of its hold.
type nodeData struct {
	owner string   // the reentrant owner; "" for a plain request
	value string   // the hold's Request.Value
	ids   []string // the entries held in a reentrant node
}

// encodeData returns the data of a queue node for n: none for a plain node
// without a value, the first form for a reentrant one, the second whenever
// there is a value.
func encodeData(n nodeData) []byte {
	if n.owner == "" && n.value == "" && len(n.ids) == 0 {
		return nil
	}
	var b strings.Builder
	if n.value == "" {
		b.WriteString(dataMagic)
	} else {
		b.WriteString(data2Magic)
	}
	b.WriteByte('\n')
	b.WriteString(base64.RawURLEncoding.EncodeToString([]byte(n.owner)))
	if n.value != "" {
		b.WriteByte('\n')
		b.WriteString(base64.RawURLEncoding.EncodeToString([]byte(n.value)))
	}
	for _, id := range n.ids {
		b.WriteByte('\n')
		b.WriteString(id)
	}
	return []byte(b.String())
}

// decodeData parses the data of a queue node that carries some; ok is false
// for any other data (a plain node without a value, or a node dlock did not
// write).
func decodeData(data []byte) (n nodeData, ok bool) {
	lines := strings.Split(string(data), "\n")
	switch {
	case len(lines) >= 2 && lines[0] == dataMagic:
		lines = lines[1:]
	case len(lines) >= 3 && lines[0] == data2Magic:
		v, err := base64.RawURLEncoding.DecodeString(lines[2])
		if err != nil || len(v) == 0 {
			return nodeData{}, false
		}
		n.value = string(v)
		lines = slices.Delete(lines[1:], 1, 2)
	default:
		return nodeData{}, false
	}
	o, err := base64.RawURLEncoding.DecodeString(lines[0])
	if err != nil {
		return nodeData{}, false
	}
	n.owner = string(o)
	for _, id := range lines[1:] {
		if checkID(id) != nil {
			return nodeData{}, false
		}
	}
	n.ids = slices.Clone(lines[1:])
	return n, true
}
