package memcache

import (
	"testing"

	gomemcache "github.com/bradfitz/gomemcache/memcache"
)

// BenchmarkUncontendedMeta is BenchmarkUncontended for a Driver that knows
// its client's server selector (as one made from a URL does), whose
// uncontended path speaks meta commands (metacas.go). rt/op counts round
// trips: one write of a pipelined round is one.
func BenchmarkUncontendedMeta(b *testing.B) {
	var w wire
	mc := w.client(b, server.URL)
	var sel gomemcache.ServerList
	if err := sel.SetServers(serverAddrs(b, server.URL)...); err != nil {
		b.Fatal(err)
	}
	benchUncontended(b, &w, mc, newTestDriver(b, mc, WithSelector(&sel)), "rt")
}
