package memory

import (
	"errors"
	"time"
)

// Fault hooks: what tests do to a real server in a container, done to the
// in-process one.

// ErrTampered is the reason a lease reports when its lock was removed or
// overwritten by Tamper.
var ErrTampered = errors.New("memory: lock removed or overwritten behind the holder's back")

// ErrRestarted is the reason a lease reports when Restart wiped its lock.
var ErrRestarted = errors.New("memory: backend restarted")

// Pause freezes the backend: every operation blocks until Resume or until its
// context ends, as on a paused server. Leases keep expiring meanwhile.
func (b *Backend) Pause() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.paused == nil {
		b.paused = make(chan struct{})
	}
}

// Resume undoes Pause.
func (b *Backend) Resume() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.paused != nil {
		close(b.paused)
		b.paused = nil
	}
}

// Restart forgets every lock, as a server restarted without persistence does.
// Fencing counters survive, as they do on a backend that persists them.
func (b *Backend) Restart() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, e := range b.locks {
		forget(e, ErrRestarted)
		delete(b.locks, k)
	}
	b.epoch++
	b.wake()
}

// Tamper removes the lock on key (overwrite false) or hands it to a stranger
// (overwrite true), behind its holders' backs, as an operator or a buggy
// client would. It reports whether there was a lock to tamper with.
func (b *Backend) Tamper(key string, overwrite bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.live(key, time.Now())
	if e == nil {
		return false
	}
	forget(e, ErrTampered)
	delete(b.locks, key)
	if overwrite {
		stranger := b.newHolder(key, "stranger", "", time.Now().Add(time.Hour), 1)
		b.locks[key] = &entry{exclusive: stranger}
	} else {
		b.wake()
	}
	return true
}

// forget tells every holder of e that it lost the lock.
func forget(e *entry, reason error) {
	if e.exclusive != nil {
		e.exclusive.lose(reason)
	}
	for _, h := range e.shared {
		h.lose(reason)
	}
}

// Info describes the lock on one key, for inspection.
type Info struct {
	// Token is the fencing token of the exclusive holder, or of the latest
	// reader.
	Token uint64
	// Expires is when the holder's lease ends unless renewed.
	Expires time.Time
	// Readers counts shared holders; zero for an exclusive lock.
	Readers int
	// Value is the exclusive holder's Request.Value.
	Value string
}

// Inspect returns the lock on key, if any.
func (b *Backend) Inspect(key string) (Info, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.live(key, time.Now())
	switch {
	case e == nil:
		return Info{}, false
	case e.exclusive != nil:
		return Info{Token: e.exclusive.token, Expires: e.exclusive.expires, Value: e.exclusive.value}, true
	}
	info := Info{Readers: len(e.shared)}
	for _, h := range e.shared {
		info.Token = max(info.Token, h.token)
		info.Expires = later(info.Expires, h.expires)
	}
	return info, true
}
