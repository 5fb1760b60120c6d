package dlock

import (
	"hash/maphash"
	"sync/atomic"
)

// contention remembers, per key, whether the latest Lock of the key by
// this Client had to wait. A head whose Lock expects to wait again
// subscribes before its first try instead of after it, so that this try
// may already queue in the backend (driver.Request.Wait, which a driver may
// honour only while a subscription is open): with a driver that keeps a
// line of waiters and grants by release (Redis), a contended Lock then
// costs one refused request instead of two, and an uncontended one still
// costs no subscription.
//
// Keys are hashed into a fixed table, so its size does not grow with the
// keys a Client locks. Two keys that share a slot only make a Lock guess
// wrong: an uncontended one subscribes when it need not, or a contended
// one tries once before subscribing. Neither changes what is granted.
type contention struct {
	seed  maphash.Seed // set by New
	slots [64]atomic.Bool
}

// slot is key's entry.
func (t *contention) slot(key string) *atomic.Bool {
	return &t.slots[maphash.String(t.seed, key)%uint64(len(t.slots))]
}
