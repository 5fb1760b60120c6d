package hazelcast

import (
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/driveropt"
)

// DefaultMap is the name of the map whose entry locks are the locks, unless
// WithMap or the URL's map option says otherwise.
const DefaultMap = "dlock"

// FenceSuffix is appended to the lock map's name to name the fencing map,
// which holds one counter per key: "dlock.fence" by default.
const FenceSuffix = ".fence"

// DefaultWaitSlice is how long one server-side wait of Acquire lasts, unless
// WithWaitSlice or the URL's wait_slice option says otherwise. It bounds how
// long a Lock whose context ends keeps waiting for the member's answer, so
// that a lock granted just then is released rather than left behind.
const DefaultWaitSlice = 250 * time.Millisecond

// The bounds of WithWaitSlice.
const (
	minWaitSlice = time.Millisecond
	maxWaitSlice = time.Minute
)

// maxMapName bounds map names, as the core bounds keys.
const maxMapName = 1024

// Option configures a Driver made by New.
type Option func(*options) error

type options struct {
	mapName   string
	waitSlice time.Duration
}

func defaultOptions() options {
	return options{mapName: DefaultMap, waitSlice: DefaultWaitSlice}
}

// apply applies opts to o, in order.
func (o *options) apply(opts []Option) error { return driveropt.Apply(o, opts) }

// WithMap sets the name of the map whose entry locks are the locks (default
// DefaultMap). The fencing counters live in the map of that name plus
// FenceSuffix. Clients that must exclude each other use the same name.
func WithMap(name string) Option {
	return driveropt.Checked("hazelcast map name", checkMapName(name), func(o *options) { o.mapName = name })
}

// WithWaitSlice sets how long one server-side wait of Acquire lasts (default
// DefaultWaitSlice; 1 ms to 1 min). A waiting Lock asks the member for the
// lock once per slice, or once per half of the TTL less a second when that is
// shorter; a Lock whose context ends returns within a slice plus a round
// trip.
func WithWaitSlice(d time.Duration) Option {
	return func(o *options) error {
		if d < minWaitSlice || d > maxWaitSlice {
			return fmt.Errorf("%w: hazelcast wait slice %v is outside %v to %v", dlock.ErrInvalidOption, d, minWaitSlice, maxWaitSlice)
		}
		o.waitSlice = d
		return nil
	}
}

func checkMapName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("empty")
	case len(name)+len(FenceSuffix) > maxMapName:
		return fmt.Errorf("%d bytes, the limit is %d", len(name), maxMapName-len(FenceSuffix))
	}
	return nil
}
