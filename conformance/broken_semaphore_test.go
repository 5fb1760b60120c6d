package conformance

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// Deliberately broken semaphores, each standing for a known way to get a
// distributed semaphore wrong, over a sound driver: the semaphore cases
// must catch each, and pass dlock's own Semaphore over the same driver.
func TestSuiteCatchesBrokenSemaphores(t *testing.T) {
	for _, tc := range []struct {
		name     string
		broken   func() semaphoreMaker
		caughtBy []string
	}{
		{"one permit too many", func() semaphoreMaker { return onePermitTooMany }, []string{"SemaphoreBound"}},
		{"count checked, then taken", newCountThenTake, []string{"SemaphoreBound"}},
		{"permits that outlive their holder", func() semaphoreMaker { return permitsOutliveHolder }, []string{"SemaphoreHolderVanishes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			broken := brokenHarness(unbroken)
			broken.newSemaphore = tc.broken()
			expectCaught(t, broken, brokenHarness(unbroken), tc.caughtBy...)
		})
	}
}

// onePermitTooMany admits permits+1 holders: an off-by-one.
func onePermitTooMany(c *dlock.Client, key string, permits int, opts ...dlock.Option) (dlock.Semaphore, error) {
	return c.Semaphore(key, permits+1, opts...)
}

// permitsOutliveHolder gives its permits a TTL of an hour whatever was
// asked: a holder that vanishes keeps its permits that long (a counter
// incremented without an expiry is the same bug).
func permitsOutliveHolder(c *dlock.Client, key string, permits int, opts ...dlock.Option) (dlock.Semaphore, error) {
	return c.Semaphore(key, permits, append(opts, dlock.WithTTL(time.Hour))...)
}

// newCountThenTake makes the maker of semaphores that read a holder count,
// and, when it is below the permits, write it back one higher a round trip
// later: two clients that read the same count both get in. The count is
// shared by every client of the harness, as a counter key on the backend
// would be; each permit is a lock of its own, on a key nobody else takes.
func newCountThenTake() semaphoreMaker {
	counts := &sharedCounts{n: map[string]int{}}
	return func(c *dlock.Client, key string, permits int, opts ...dlock.Option) (dlock.Semaphore, error) {
		return &countThenTake{c: c, key: key, permits: permits, opts: opts, counts: counts}, nil
	}
}

// sharedCounts stands for a counter per key on the backend, read and
// written by separate requests.
type sharedCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (s *sharedCounts) get(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[key]
}

func (s *sharedCounts) set(key string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n[key] = n
}

func (s *sharedCounts) add(key string, d int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n[key] += d
}

type countThenTake struct {
	c       *dlock.Client
	key     string
	permits int
	opts    []dlock.Option
	counts  *sharedCounts
}

func (s *countThenTake) Key() string  { return s.key }
func (s *countThenTake) Permits() int { return s.permits }

func (s *countThenTake) TryAcquire(ctx context.Context) (dlock.Lease, error) {
	n := s.counts.get(s.key) // GET count
	if n >= s.permits {
		return nil, fmt.Errorf("all %d permits held: %w", s.permits, dlock.ErrLocked)
	}
	time.Sleep(slowRoundTrip) // the SET's round trip
	s.counts.set(s.key, n+1)  // SET count n+1
	m, err := s.c.Mutex(s.key+"/holder/"+rand.Text(), s.opts...)
	if err != nil {
		return nil, err
	}
	l, err := m.Lock(ctx)
	if err != nil {
		s.counts.add(s.key, -1)
		return nil, err
	}
	return &countedLease{Lease: l, s: s}, nil
}

func (s *countThenTake) Acquire(ctx context.Context) (dlock.Lease, error) {
	for {
		l, err := s.TryAcquire(ctx)
		if err == nil || ctx.Err() != nil {
			return l, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(2 * time.Millisecond): // poll
		}
	}
}

// countedLease gives its permit back by decrementing the count.
type countedLease struct {
	dlock.Lease
	s    *countThenTake
	once sync.Once
}

func (l *countedLease) Unlock(ctx context.Context) error {
	l.once.Do(func() { l.s.counts.add(l.s.key, -1) })
	return l.Lease.Unlock(ctx)
}
