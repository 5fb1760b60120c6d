package memory

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// Backend is an in-process lock server: the shared state that the Drivers
// made over it contend for, as clients of one Redis server would. It is safe
// for concurrent use. The zero Backend is not usable; call NewBackend.
//
// Its fault hooks (Pause, Resume, Restart, Tamper) let tests do to it what
// they do to a real server in a container.
type Backend struct {
	mu      sync.Mutex
	locks   map[string]*entry
	fences  map[string]uint64
	changed chan struct{}        // closed and replaced whenever a lock may have become free
	queues  map[string][]*ticket // the blocked Acquire calls of each key, first come first
	paused  chan struct{}        // non-nil while paused; closed by Resume
	epoch   uint64               // advanced by Restart
}

// entry is the state of one key: at most one exclusive holder, or any number
// of shared ones.
type entry struct {
	exclusive *holder
	shared    map[string]*holder // by identity
}

// holder is one grant. Reentrant grants are counted on one holder.
type holder struct {
	identity string // the owner for reentrant grants, the request ID otherwise
	value    string // the granting request's Value (driver.Capabilities.Values)
	token    uint64
	count    int
	expires  time.Time
	leases   []*lease // the grant's unreleased leases, told when it is lost
}

// NewBackend returns an empty Backend.
func NewBackend() *Backend {
	return &Backend{
		locks:   map[string]*entry{},
		fences:  map[string]uint64{},
		queues:  map[string][]*ticket{},
		changed: make(chan struct{}),
	}
}

// gate blocks while the backend is paused, like a frozen server, until ctx
// ends. Called without b.mu.
func (b *Backend) gate(ctx context.Context) error {
	b.mu.Lock()
	paused := b.paused
	b.mu.Unlock()
	if paused == nil {
		return nil
	}
	select {
	case <-paused:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// live returns the entry of key with expired grants removed, or nil. Callers
// hold b.mu.
func (b *Backend) live(key string, now time.Time) *entry {
	e := b.locks[key]
	if e == nil {
		return nil
	}
	if e.exclusive != nil && !now.Before(e.exclusive.expires) {
		e.exclusive = nil
	}
	for id, h := range e.shared {
		if !now.Before(h.expires) {
			delete(e.shared, id)
		}
	}
	if e.exclusive == nil && len(e.shared) == 0 {
		delete(b.locks, key)
		return nil
	}
	return e
}

// wake tells every waiter that a lock may have become free. Callers hold b.mu.
func (b *Backend) wake() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// ticket is one blocked Acquire call's place in its key's queue, known by
// its address. It is not zero-sized: pointers to distinct zero-size values
// may be equal, which made every ticket the same one (no queue order, and
// a dequeue removed every ticket of the key).
type ticket struct{ _ byte }

// enqueue puts t at the back of key's queue. Callers hold b.mu.
func (b *Backend) enqueue(key string, t *ticket) {
	b.queues[key] = append(b.queues[key], t)
}

// dequeue takes t out of key's queue, and wakes the waiters: the next one
// may be at the front now. Callers hold b.mu.
func (b *Backend) dequeue(key string, t *ticket) {
	q := slices.DeleteFunc(b.queues[key], func(o *ticket) bool { return o == t })
	if len(q) == 0 {
		delete(b.queues, key)
	} else {
		b.queues[key] = q
	}
	b.wake()
}

// queuedAhead reports whether a blocked Acquire call other than t is first
// in key's queue: then a new grant is its, not t's (nil t: a single try,
// which neither queues nor jumps the queue). Callers hold b.mu.
func (b *Backend) queuedAhead(key string, t *ticket) bool {
	q := b.queues[key]
	return len(q) > 0 && q[0] != t
}

// grant tries to take key for req, a new grant reserving block tokens; it
// returns the holder, or the time left on the lease that blocks it (zero
// when the lock is free but a blocked Acquire call comes first). t is the
// caller's place in the key's queue, nil for a single try: a new grant goes
// to the first in the queue, while re-entries by an owner that holds the
// lock are granted whoever waits. Callers hold b.mu.
func (b *Backend) grant(req driver.Request, now time.Time, block uint64, t *ticket) (*holder, time.Duration) {
	identity := req.ID
	if req.Owner != "" {
		identity = req.Owner
	}
	e := b.live(req.Key, now)
	if e == nil {
		if b.queuedAhead(req.Key, t) {
			return nil, 0
		}
		e = &entry{} // shared is made by the first reader: most locks have none
		b.locks[req.Key] = e
	}
	expires := now.Add(req.TTL)
	if req.Mode == driver.Shared {
		if e.exclusive != nil {
			return nil, e.exclusive.expires.Sub(now)
		}
		if h := e.shared[identity]; h != nil && req.Owner != "" {
			h.count++
			h.expires = later(h.expires, expires)
			return h, 0
		}
		if b.queuedAhead(req.Key, t) {
			return nil, 0
		}
		h := b.newHolder(req.Key, identity, req.Value, expires, block)
		if e.shared == nil {
			e.shared = map[string]*holder{}
		}
		e.shared[identity] = h
		return h, 0
	}
	if h := e.exclusive; h != nil {
		if req.Owner != "" && h.identity == identity {
			h.count++
			h.expires = later(h.expires, expires)
			return h, 0
		}
		return nil, h.expires.Sub(now)
	}
	if len(e.shared) > 0 {
		var left time.Duration
		for _, h := range e.shared {
			left = max(left, h.expires.Sub(now))
		}
		return nil, left
	}
	if b.queuedAhead(req.Key, t) {
		return nil, 0
	}
	e.exclusive = b.newHolder(req.Key, identity, req.Value, expires, block)
	return e.exclusive, 0
}

// newHolder makes a new grant of key, whose token and the block-1 after it
// are issued to nobody else (driver.Capabilities.TokenBlock).
func (b *Backend) newHolder(key, identity, value string, expires time.Time, block uint64) *holder {
	token := b.fences[key] + 1
	b.fences[key] += max(block, 1)
	return &holder{identity: identity, value: value, token: token, count: 1, expires: expires}
}

// lose tells every unreleased lease of h that it lost the lock, for reason.
// Callers hold b.mu.
func (h *holder) lose(reason error) {
	for _, l := range h.leases {
		l.lose(reason)
	}
	h.leases = nil
}

// drop forgets l, released, among h's leases. Callers hold b.mu.
func (h *holder) drop(l *lease) {
	h.leases = slices.DeleteFunc(h.leases, func(o *lease) bool { return o == l })
}

// find returns the live holder of key with the given identity and token.
// Callers hold b.mu.
func (b *Backend) find(k, identity string, token uint64, mode driver.Mode, now time.Time) (*entry, *holder) {
	e := b.live(k, now)
	if e == nil {
		return nil, nil
	}
	h := e.exclusive
	if mode == driver.Shared {
		h = e.shared[identity]
	}
	if h == nil || h.identity != identity || h.token != token {
		return nil, nil
	}
	return e, h
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
