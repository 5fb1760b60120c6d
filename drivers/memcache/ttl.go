package memcache

import (
	"fmt"
	"time"
)

// memcached keeps time in whole seconds: an item stored with a relative
// expiry of N seconds gets the expiry "current_time + N", where current_time
// is a counter of whole seconds that a timer advances about once a second,
// and it is gone once current_time reaches that value. current_time therefore
// lags the real time by up to a second at the instant of the store, and the
// item lives between N-1 and N seconds. Worse, the timer is re-armed for one
// second after each tick, so its phase drifts (measured: 0.7 ms per tick on
// memcached 1.6.18), and when it wraps past a whole second current_time
// jumps by two: an item whose lifetime spans that tick lives between N-2 and
// N-1 seconds. The guaranteed lifetime is thus N-2 seconds, less the lateness
// of the ticks, for which tickMargin is kept.

// The TTLs the driver accepts.
const (
	// MinTTL is the shortest TTL the driver accepts: with memcached's
	// whole-second expiry (see "Guarantees" in the package documentation),
	// a TTL of 5 s is guaranteed for 2.9 s, which leaves the core's
	// renewal (every TTL/3, so at 1.67 s) more than a second to get
	// through. A renewal that cannot reach the server fails when its
	// requests time out (the client's Timeout, 500 ms from a URL), so the
	// lease is reported uncertain well before its deadline. Only from 7 s
	// on does the deadline also come after a renewal attempt that hangs
	// for the core's whole limit of TTL/3.
	MinTTL = 5 * time.Second

	// MaxTTL is the longest TTL memcached takes as a relative expiry: 30
	// days. A larger number would be read as a Unix time.
	MaxTTL = 30 * 24 * time.Hour
)

const (
	// lostSeconds is how much of the expiry the server's clock may eat.
	lostSeconds = 2 * time.Second
	// tickMargin covers the lateness of memcached's clock ticks.
	tickMargin = 100 * time.Millisecond
)

// ttlReason explains MinTTL and MaxTTL in the core's error for a TTL outside
// them, as checkTTL does.
var ttlReason = fmt.Sprintf("memcached expires items in whole seconds by a clock that ticks once a second, so it guarantees only the TTL rounded up to whole seconds minus 2.1 s (%v of a %v TTL), and the lease must outlast the renewal at TTL/3; 30 days is the longest relative expiry memcached takes",
	validityOf(expirySeconds(MinTTL)), MinTTL)

// checkTTL reports why ttl cannot be a lease length on memcached, or nil.
func checkTTL(ttl time.Duration) error {
	switch {
	case ttl < MinTTL:
		return fmt.Errorf("%v is shorter than the memcached driver's minimum of %v: memcached expires items in whole seconds by a clock that ticks once a second, so it guarantees only the TTL rounded up to whole seconds minus 2.1 s (%v of a %v TTL), and the lease must outlast the renewal at TTL/3",
			ttl, MinTTL, validityOf(expirySeconds(MinTTL)), MinTTL)
	case ttl > MaxTTL:
		return fmt.Errorf("%v is longer than %v, the longest relative expiry memcached takes", ttl, MaxTTL)
	}
	return nil
}

// expirySeconds is the relative expiry the driver sends for ttl: the TTL
// rounded up to whole seconds, so never shorter than asked, never 0 (which
// memcached reads as "never expires") and, for TTLs the driver accepts,
// never over 30 days (which it would read as a Unix time).
func expirySeconds(ttl time.Duration) int32 {
	return int32((ttl + time.Second - 1) / time.Second)
}

// validityOf is how long an item stored with a relative expiry of secs is
// guaranteed to stay, counted from any moment before the server ran the
// store: secs - 2 s - tickMargin (see above).
func validityOf(secs int32) time.Duration {
	return max(time.Duration(secs)*time.Second-lostSeconds-tickMargin, 0)
}
