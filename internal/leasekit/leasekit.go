// Package leasekit holds the part of a lease that every driver keeps the
// same way: the fencing token drawn at the grant and the validity of the
// latest grant or extension, which driver.Lease's Token and Validity report.
// What the two mean is each driver's (its lease type says); how they are kept
// is not, so a driver's lease embeds a [Grant] instead of repeating it.
package leasekit

import (
	"sync/atomic"
	"time"
)

// Grant is embedded in a driver's lease type, which then has driver.Lease's
// Token and Validity. Its zero value is a grant with token 0 and no
// validity; [Grant.Start] gives it its own. Token never changes after Start;
// Validity may be read while an Extend sets it, so it is kept atomically.
type Grant struct {
	token    uint64
	validity atomic.Int64 // a time.Duration
}

// Start records the grant's fencing token and its validity. Call it once,
// before the lease is handed to anyone.
func (g *Grant) Start(token uint64, validity time.Duration) {
	g.token = token
	g.validity.Store(int64(validity))
}

// Token returns the fencing token drawn when the lock was granted.
func (g *Grant) Token() uint64 { return g.token }

// Validity returns how long, from the start of the latest acquire or extend
// call, the lock is sure to be held.
func (g *Grant) Validity() time.Duration { return time.Duration(g.validity.Load()) }

// SetValidity records the validity of an extension that succeeded.
func (g *Grant) SetValidity(validity time.Duration) { g.validity.Store(int64(validity)) }
