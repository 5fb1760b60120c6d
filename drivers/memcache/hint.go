package memcache

import (
	"sync"
	"time"
)

// maxHints bounds the hint cache: past it, expired hints are dropped, and if
// that is not enough, all of them.
const maxHints = 4096

// hints remembers, per lock item, when its holder's lease is expected to end,
// so that an Acquire that finds the lock held can report the holder's
// remaining time without reading the item again: a failed attempt then costs
// one request (the add) instead of two. A hint that is too early (the holder
// renewed, or another took over) only makes a waiter poll once more and
// refresh it; it can never make one sleep past a release, since the core
// only uses it to cap its sleep.
type hints struct {
	mu sync.Mutex
	m  map[string]time.Time // lock name → local time (monotonic) the lease ends
}

// get returns how long the lease on name is still expected to run, if a hint
// says so.
func (h *hints) get(name string) (time.Duration, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	end, ok := h.m[name]
	if !ok {
		return 0, false
	}
	left := time.Until(end)
	if left <= 0 {
		delete(h.m, name)
		return 0, false
	}
	return left, true
}

// put records that the lease on name is expected to run for left more.
func (h *hints) put(name string, left time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = make(map[string]time.Time)
	}
	now := time.Now()
	if len(h.m) >= maxHints {
		for k, end := range h.m {
			if !now.Before(end) {
				delete(h.m, k)
			}
		}
		if len(h.m) >= maxHints {
			clear(h.m)
		}
	}
	h.m[name] = now.Add(left)
}

// drop forgets the hint on name: the lock was seen free, or granted here.
func (h *hints) drop(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.m, name)
}
