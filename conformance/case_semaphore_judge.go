package conformance

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
)

// What the semaphore cases share: how they make a semaphore, and how they
// judge the permits' holds.

// semaphoreMaker makes a semaphore over a client: Client.Semaphore, or, in
// the suite's self-tests, a deliberately broken one (Harness.newSemaphore).
type semaphoreMaker func(c *dlock.Client, key string, permits int, opts ...dlock.Option) (dlock.Semaphore, error)

// semaphore makes the semaphore key with permits over c, or fails the case.
func (e *env) semaphore(t *T, c *dlock.Client, key string, permits int, opts ...dlock.Option) dlock.Semaphore {
	make := e.h.newSemaphore
	if make == nil {
		make = (*dlock.Client).Semaphore
	}
	s, err := make(c, key, permits, opts...)
	if err != nil {
		t.Fatalf("Semaphore(%q, %d): %v", key, permits, err)
	}
	return s
}

// permitHolds records the holds of a semaphore's permits, by permit (the
// lease's Key), for judgePermits.
type permitHolds struct {
	mu    sync.Mutex
	byKey map[string]*holds
}

// of returns the holds of the permit key, made on first use.
func (p *permitHolds) of(key string) *holds {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byKey == nil {
		p.byKey = map[string]*holds{}
	}
	hs := p.byKey[key]
	if hs == nil {
		hs = &holds{}
		p.byKey[key] = hs
	}
	return hs
}

// unlock unlocks a watched permit and records its hold (holds.unlock).
func (p *permitHolds) unlock(t *T, w *held) {
	hs := p.of(w.l.Key())
	hs.unlock(t, w)
}

// judge checks the holds: each permit is a lock of its own (no two holders
// of one permit at once, its tokens rising in grant order, no deadline
// later than the TTL after the grant: judge), and at no moment are more
// than permits holds trusted at once across all of them.
func (p *permitHolds) judge(t *T, e *env, permits int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	type event struct {
		at    time.Time
		delta int
		h     hold
	}
	var events []event
	total := 0
	for key, hs := range p.byKey {
		hs.mu.Lock()
		v := judge(t, e, hs.all)
		if v.overlaps+v.regressions+v.late > 0 {
			t.Logf("permit %q: %d holds, %d overlaps, %d token regressions, %d deadlines past Acquire's return+TTL", key, len(hs.all), v.overlaps, v.regressions, v.late)
		}
		for _, h := range hs.all {
			total++
			if h.granted.Before(h.end) { // trusted at all
				events = append(events, event{h.granted, 1, h}, event{h.end, -1, h})
			}
		}
		hs.mu.Unlock()
	}
	// At equal times an end comes first: a permit given back at the very
	// instant another is granted was not held together with it.
	slices.SortFunc(events, func(a, b event) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta
	})
	inside, most, shown := 0, 0, 0
	for _, ev := range events {
		inside += ev.delta
		most = max(most, inside)
		if ev.delta > 0 && inside > permits {
			if shown++; shown <= 5 {
				t.Errorf("%d holders trusted at once, the semaphore has %d permits; the last granted: %v", inside, permits, ev.h)
			}
		}
	}
	t.Logf("%d permits held over %d permit(s); at most %d at once (of %d)", total, len(p.byKey), most, permits)
}

// acquireWithin takes a permit of s, failing t when none is granted within
// d; what names the Acquire in the message.
func acquireWithin(t *T, s dlock.Semaphore, d time.Duration, what string) dlock.Lease {
	ctx, cancel := contextWithTimeout(t, d)
	defer cancel()
	l, err := s.Acquire(ctx)
	if err != nil {
		t.Fatalf("%s: got %v, want a permit within %v", what, err, d)
	}
	return l
}

// acquirePermit takes a permit of s or fails the case.
func acquirePermit(t *T, s dlock.Semaphore) dlock.Lease {
	l, err := s.Acquire(t.Context())
	if err != nil {
		t.Fatalf("Acquire(%q): %v", s.Key(), err)
	}
	return l
}

// permitKeys are the keys of the locks the core's semaphore key is made of,
// as package dlock documents them: its permits' and its gate's.
func permitKeys(key string, permits int) []string {
	keys := []string{key + "/gate"}
	for i := range permits {
		keys = append(keys, key+"/permit/"+strconv.Itoa(i))
	}
	return keys
}

// gateHeld reports whether the gate of the semaphore key is held now, by
// taking it and giving it back at once when it is free.
func gateHeld(t *T, m dlock.Mutex) bool {
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	l, err := m.TryLock(ctx)
	if err != nil {
		return errors.Is(err, dlock.ErrLocked)
	}
	_ = l.Unlock(t.Context())
	return false
}
