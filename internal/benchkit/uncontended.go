package benchkit

import (
	"context"
	"time"
)

// Uncontended is acquire+release with nobody else around.
type Uncontended struct {
	Lock     Latency `json:"lock"`     // dlock Lock + Unlock, renewal on
	Raw      Latency `json:"raw"`      // the raw client operations
	Ratio    float64 `json:"ratio"`    // Lock.P50 / Raw.P50
	Requests float64 `json:"requests"` // backend requests per dlock acquire+release
}

// MeasureUncontended runs n dlock and n raw acquire+release cycles, interleaved
// so that both see the same machine load, on one client.
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
	var lockTimes, rawTimes []time.Duration
	var requests uint64
	for range n {
		r0 := t.requests()
		start := time.Now()
		l, err := m.Lock(ctx)
		if err != nil {
			return Uncontended{}, err
		}
		if err := l.Unlock(ctx); err != nil {
			return Uncontended{}, err
		}
		lockTimes = append(lockTimes, time.Since(start))
		requests += t.requests() - r0
		if t.Raw != nil {
			start = time.Now()
			if err := t.Raw(ctx, key+"/raw"); err != nil {
				return Uncontended{}, err
			}
			rawTimes = append(rawTimes, time.Since(start))
		}
	}
	u := Uncontended{Lock: summarize(lockTimes), Raw: summarize(rawTimes), Requests: float64(requests) / float64(n)}
	if u.Raw.P50 > 0 {
		u.Ratio = float64(u.Lock.P50) / float64(u.Raw.P50)
	}
	return u, nil
}
