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
	lock := MutexLocker(m)
	requests, err := CountRequests(ctx, lock, t.Requests, min(n, RequestRounds))
	if err != nil {
		return Uncontended{}, err
	}
	ops := []func(context.Context) error{func(ctx context.Context) error { return LockUnlock(ctx, lock) }}
	if t.Raw != nil {
		ops = append(ops, func(ctx context.Context) error { return t.Raw(ctx, key+"/raw") })
	}
	lat, err := Interleaved(ctx, n, ops...)
	if err != nil {
		return Uncontended{}, err
	}
	u := Uncontended{Lock: lat[0], Requests: requests}
	if t.Raw != nil {
		u.Raw = lat[1]
	}
	if u.Raw.P50 > 0 {
		u.Ratio = float64(u.Lock.P50) / float64(u.Raw.P50)
	}
	return u, nil
}

// Interleaved runs each of ops n times, taking turns (the first, the
// second, ..., the first again), so that all see the same machine load,
// and summarises each one's times, in the order of ops.
func Interleaved(ctx context.Context, n int, ops ...func(context.Context) error) ([]Latency, error) {
	times := make([][]time.Duration, len(ops))
	for range n {
		for i, op := range ops {
			start := time.Now()
			if err := op(ctx); err != nil {
				return nil, err
			}
			times[i] = append(times[i], time.Since(start))
		}
	}
	lat := make([]Latency, len(ops))
	for i := range ops {
		lat[i] = summarize(times[i])
	}
	return lat, nil
}

// RequestRounds is how many acquire+release cycles the request count is
// taken over: few, because a counter may be slow to read (an HTTP scrape).
const RequestRounds = 50

// CountRequests runs rounds acquire+release cycles of l on their own (so
// that nothing else's requests are counted), and returns the backend
// requests per cycle that requests counted, or 0 when it is nil.
func CountRequests(ctx context.Context, l Locker, requests func() uint64, rounds int) (float64, error) {
	if requests == nil || rounds == 0 {
		return 0, nil
	}
	r0 := requests()
	for range rounds {
		if err := LockUnlock(ctx, l); err != nil {
			return 0, err
		}
	}
	return perSection(requests, r0, rounds), nil
}

// LockUnlock takes l's lock and releases it at once.
func LockUnlock(ctx context.Context, l Locker) error {
	unlock, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	return unlock(ctx)
}
