package postgres

import (
	"encoding/binary"
	"testing"
	"time"
)

// int8Array encodes vs as PostgreSQL sends an int8[] in binary format; a
// nil element is NULL.
func binInt8Array(vs ...*int64) []byte {
	be := binary.BigEndian
	b := be.AppendUint32(nil, 1)
	b = be.AppendUint32(b, 0)
	b = be.AppendUint32(b, oidInt8)
	b = be.AppendUint32(b, uint32(len(vs)))
	b = be.AppendUint32(b, 1)
	for _, v := range vs {
		if v == nil {
			b = be.AppendUint32(b, 0xffffffff)
			continue
		}
		b = be.AppendUint32(b, 8)
		b = be.AppendUint64(b, uint64(*v))
	}
	return b
}

func int8Ptrs(vs ...int64) []*int64 {
	out := make([]*int64, len(vs))
	for i := range vs {
		out[i] = &vs[i]
	}
	return out
}

// TestDecodeFlatAcquire reads each outcome of flatAcquireSQL, and refuses
// rows that are none of them.
func TestDecodeFlatAcquire(t *testing.T) {
	pid := binary.BigEndian.AppendUint32(nil, 4242)
	cases := []struct {
		name string
		o    []byte
		want result
		bad  bool
	}{
		{"not ours", binInt8Array(int8Ptrs(-1)...), result{pid: 4242}, false},
		{"locked", binInt8Array(int8Ptrs(0)...), result{ok: true, pid: 4242}, false},
		{"blocked", binInt8Array(int8Ptrs(-2, 1)...), result{ok: true, got: true, pid: 4242}, false},
		{"held", binInt8Array(int8Ptrs(77, 1500, 4)...), result{ok: true, got: true, held: true, token: 77, waited: 1500 * time.Microsecond, pid: 4242}, false},
		{"held, no wait", binInt8Array(int8Ptrs(78, 0, 0)...), result{ok: true, got: true, held: true, token: 78, pid: 4242}, false},
		{"held, NULL wait", binInt8Array(int8Ptrs(79)[0], nil, int8Ptrs(0)[0]), result{ok: true, got: true, held: true, token: 79, pid: 4242}, false},
		{"token without its fields", binInt8Array(int8Ptrs(80)...), result{}, true},
		{"unknown code", binInt8Array(int8Ptrs(-3)...), result{}, true},
		{"empty array", binInt8Array(), result{}, true},
		{"truncated", binInt8Array(int8Ptrs(77, 1500, 4)...)[:30], result{}, true},
		{"not an array", []byte{1}, result{}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := decodeFlatAcquire([][]byte{c.o, pid})
			if c.bad {
				if err == nil {
					t.Fatalf("decoded %+v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
	if _, err := decodeFlatAcquire([][]byte{binInt8Array(int8Ptrs(0)...)}); err == nil {
		t.Fatal("a row of one column decoded")
	}
}

// TestDecodeInt8ArrayType refuses an array of another element type.
func TestDecodeInt8ArrayType(t *testing.T) {
	b := binInt8Array(int8Ptrs(1)...)
	binary.BigEndian.PutUint32(b[8:12], 23) // int4
	if _, err := decodeInt8Array(b); err == nil {
		t.Fatal("an int4[] decoded as int8[]")
	}
}
