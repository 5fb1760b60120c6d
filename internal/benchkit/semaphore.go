package benchkit

import (
	"context"
	"time"

	"github.com/dlock-go/dlock"
)

// Semaphore is a dlock Semaphore's acquire+release, alone and contended.
type Semaphore struct {
	Permits int `json:"permits"`
	// Uncontended is Acquire then Unlock with nobody else around, one
	// client; Lock is a Mutex's Lock then Unlock on the same client,
	// interleaved with it, for comparison.
	Uncontended Latency `json:"uncontended"`
	Lock        Latency `json:"lock"`
	// Requests is backend requests per uncontended Acquire+Unlock, when
	// counted.
	Requests float64 `json:"requests,omitempty"`
	// Contended is goroutines over clients acquiring and releasing permits
	// of one semaphore as fast as they can: a critical section is a permit
	// held.
	Contended Contended `json:"contended"`
}

// Semaphore measurement shape: a few permits shared by more goroutines,
// over independent clients.
const (
	semaphorePermits    = 4
	semaphoreGoroutines = 16
	semaphoreClients    = 8
)

// SemaphoreLocker is the Locker of a dlock Semaphore: Acquire, then the
// permit's Unlock.
func SemaphoreLocker(s dlock.Semaphore) Locker {
	return LockerFunc(func(ctx context.Context) (func(context.Context) error, error) {
		l, err := s.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		return l.Unlock, nil
	})
}

// MeasureSemaphore measures a semaphore of 4 permits: rounds uncontended
// Acquire+Unlock cycles interleaved with a Mutex's Lock+Unlock, then 16
// goroutines over 8 clients contending for d.
func MeasureSemaphore(ctx context.Context, t Target, rounds int, d time.Duration) (Semaphore, error) {
	r := Semaphore{Permits: semaphorePermits}
	cs, done, err := t.clients(ctx, 1)
	if err != nil {
		return r, err
	}
	defer done()
	key := newKey("semaphore")
	s, err := cs[0].Semaphore(key, semaphorePermits)
	if err != nil {
		return r, err
	}
	m, err := cs[0].Mutex(key + "/mutex")
	if err != nil {
		return r, err
	}
	sem, lock := SemaphoreLocker(s), MutexLocker(m)
	if r.Requests, err = CountRequests(ctx, sem, t.Requests, min(rounds, RequestRounds)); err != nil {
		return r, err
	}
	lat, err := Interleaved(ctx, rounds,
		func(ctx context.Context) error { return LockUnlock(ctx, sem) },
		func(ctx context.Context) error { return LockUnlock(ctx, lock) })
	if err != nil {
		return r, err
	}
	r.Uncontended, r.Lock = lat[0], lat[1]

	ccs, cdone, err := t.clients(ctx, semaphoreClients)
	if err != nil {
		return r, err
	}
	defer cdone()
	ckey := newKey("semaphore-contended")
	ls := make([]Locker, semaphoreGoroutines)
	for g := range ls {
		s, err := ccs[g%len(ccs)].Semaphore(ckey, semaphorePermits)
		if err != nil {
			return r, err
		}
		ls[g] = ignoreUnlockErrors(SemaphoreLocker(s))
	}
	r.Contended, err = MeasureContendedLockers(ctx, ls, semaphoreClients, d, t.Requests)
	return r, err
}
