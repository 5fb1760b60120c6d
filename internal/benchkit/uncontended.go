package benchkit

import (
	"context"
	"time"

	"github.com/dlock-go/dlock"
)

// Uncontended is acquire+release with nobody else around.
type Uncontended struct {
	Lock     Latency `json:"lock"`     // dlock Lock + Unlock, renewal on
	Raw      Latency `json:"raw"`      // the raw client operations
	Ratio    float64 `json:"ratio"`    // Lock.P50 / Raw.P50
	Requests float64 `json:"requests"` // backend requests per dlock acquire+release
}

// MeasureUncontended runs n dlock and n raw acquire+release cycles, interleaved
// so that both see the same machine load, on one client. Backend requests
// are counted over a few cycles run on their own first.
func MeasureUncontended(ctx context.Context, t Target, n int) (Uncontended, error) {
	cs, done, err := t.clients(ctx, 1)
	if err != nil {
		return Uncontended{}, err
	}
	defer done()
	key := newKey("uncontended")
	m, err := cs[0].Mutex(key)
	if err != nil {
		return Uncontended{}, err
	}
	requests, err := countRequests(ctx, t, m, min(n, requestRounds))
	if err != nil {
		return Uncontended{}, err
	}
	var lockTimes, rawTimes []time.Duration
	for range n {
		start := time.Now()
		if err := lockUnlock(ctx, m); err != nil {
			return Uncontended{}, err
		}
		lockTimes = append(lockTimes, time.Since(start))
		if t.Raw != nil {
			start = time.Now()
			if err := t.Raw(ctx, key+"/raw"); err != nil {
				return Uncontended{}, err
			}
			rawTimes = append(rawTimes, time.Since(start))
		}
	}
	u := Uncontended{Lock: summarize(lockTimes), Raw: summarize(rawTimes), Requests: requests}
	if u.Raw.P50 > 0 {
		u.Ratio = float64(u.Lock.P50) / float64(u.Raw.P50)
	}
	return u, nil
}

// requestRounds is how many acquire+release cycles the request count is
// taken over: few, because a counter may be slow to read (an HTTP scrape).
const requestRounds = 50

// countRequests runs rounds acquire+release cycles of m on their own, before
// the timed ones (so that the raw comparison's requests are not counted),
// and returns the backend requests per cycle, or 0 when the target does not
// count them.
func countRequests(ctx context.Context, t Target, m dlock.Mutex, rounds int) (float64, error) {
	if t.Requests == nil || rounds == 0 {
		return 0, nil
	}
	r0 := t.requests()
	for range rounds {
		if err := lockUnlock(ctx, m); err != nil {
			return 0, err
		}
	}
	return float64(t.requests()-r0) / float64(rounds), nil
}

// lockUnlock takes m and releases it at once.
func lockUnlock(ctx context.Context, m dlock.Mutex) error {
	l, err := m.Lock(ctx)
	if err != nil {
		return err
	}
	return l.Unlock(ctx)
}
