package benchkit

import (
	"context"

	"github.com/dlock-go/dlock"
)

// Locker is one contender for a lock, as the measurements see it: a dlock
// Mutex, or another library's lock over a client of its own (the peers
// comparison, bench/peers). Lock blocks until it holds the lock or ctx
// ends, and returns how to release it.
type Locker interface {
	Lock(ctx context.Context) (unlock func(context.Context) error, err error)
}

// LockerFunc is a Locker made of a function.
type LockerFunc func(ctx context.Context) (unlock func(context.Context) error, err error)

// Lock calls f.
func (f LockerFunc) Lock(ctx context.Context) (func(context.Context) error, error) { return f(ctx) }

// MutexLocker is the Locker of a dlock Mutex: Lock, then the lease's Unlock.
func MutexLocker(m dlock.Mutex) Locker {
	return LockerFunc(func(ctx context.Context) (func(context.Context) error, error) {
		l, err := m.Lock(ctx)
		if err != nil {
			return nil, err
		}
		return l.Unlock, nil
	})
}

// mutexLockers makes goroutines Lockers of key, spread over the clients
// cs round robin.
func mutexLockers(cs []*dlock.Client, key string, goroutines int) ([]Locker, error) {
	ls := make([]Locker, goroutines)
	for g := range ls {
		m, err := cs[g%len(cs)].Mutex(key)
		if err != nil {
			return nil, err
		}
		ls[g] = MutexLocker(m)
	}
	return ls, nil
}

// perSection is the requests counted since r0 by requests, per critical
// section; 0 when requests is nil or there were none.
func perSection(requests func() uint64, r0 uint64, sections int) float64 {
	if requests == nil || sections == 0 {
		return 0
	}
	return float64(requests()-r0) / float64(sections)
}

// startCount reads requests, or 0 when it is nil.
func startCount(requests func() uint64) uint64 {
	if requests == nil {
		return 0
	}
	return requests()
}
