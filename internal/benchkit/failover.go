package benchkit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/dlock-go/dlock"
)

// Failover is how long an election stays without a leader when its leader
// crashes: from the crash to the follower's Campaign returning.
type Failover struct {
	// TTL is the leadership lease's TTL: on backends where a vanished
	// holder's lock lasts until it expires, failover is most of it.
	TTL time.Duration `json:"ttl_ns"`
	// N is how many crashes were timed; P50, P95 and Max are over them (the
	// nearest-rank percentile: with few rounds, P95 is the slowest).
	N   int           `json:"n"`
	P50 time.Duration `json:"p50_ns"`
	P95 time.Duration `json:"p95_ns"`
	Max time.Duration `json:"max_ns"`
}

// failoverTTL is the standard suite's leadership TTL: short, so that rounds
// that wait it out stay few seconds, and long enough for a loaded machine
// to renew in time.
const failoverTTL = 2 * time.Second

// failoverRounds is the standard suite's number of crashes timed.
const failoverRounds = 5

// MeasureFailover times rounds leader crashes on a TTL of ttl (at least
// t.MinTTL). In each round a leader campaigns on a client of its own and
// a follower campaigns on another; after a random part of a renewal period
// (so that the crash falls anywhere between two renewals, as a real one
// does) the leader's client vanishes: it stops renewing and closes its
// connections without giving the leadership back (Close with an ended
// context, as a process killed does). The round's figure is from that
// moment to the follower's Campaign returning.
//
// A vanished leader's lock lasts until it expires on backends that keep it
// by TTL (Redis, memcached), and on etcd until the client's session lease
// expires (its session TTL, whatever the lock's); on backends where a lock
// lives as long as the connection or session (PostgreSQL, ZooKeeper,
// Hazelcast),
// closing the connection frees it at once, as a killed process's closed
// socket does (for ZooKeeper, closing a session ends it at once, where a
// killed process's session would last until its timeout).
func MeasureFailover(ctx context.Context, t Target, rounds int, ttl time.Duration) (Failover, error) {
	ttl = max(ttl, t.MinTTL)
	r := Failover{TTL: ttl}
	ds := make([]time.Duration, 0, rounds)
	for range rounds {
		d, err := failoverRound(ctx, t, ttl)
		if err != nil {
			return r, err
		}
		ds = append(ds, d)
	}
	slices.Sort(ds)
	if n := len(ds); n > 0 {
		at := func(q float64) time.Duration { return ds[min(n-1, int(q*float64(n)))] }
		r.N, r.P50, r.P95, r.Max = n, at(0.50), at(0.95), ds[n-1]
	}
	return r, nil
}

// failoverRound times one crash of a leader, with a follower waiting.
func failoverRound(ctx context.Context, t Target, ttl time.Duration) (time.Duration, error) {
	// Bounds a round whose follower never leads: the lock must be free
	// within the TTL, or on etcd the session TTL (a minute at most in the
	// configurations dlock bench is pointed at, we assume); the rest is room
	// for a loaded machine.
	ctx, cancel := context.WithTimeout(ctx, 4*ttl+2*time.Minute)
	defer cancel()
	key := newKey("failover")
	leader, err := t.NewClient(ctx, dlock.WithTTL(ttl))
	if err != nil {
		return 0, err
	}
	crashed := false
	defer func() {
		if !crashed {
			_ = leader.Close(context.WithoutCancel(ctx))
		}
	}()
	follower, err := t.NewClient(ctx, dlock.WithTTL(ttl))
	if err != nil {
		return 0, err
	}
	defer func() { _ = follower.Close(context.WithoutCancel(ctx)) }()
	el, err := leader.Election(key)
	if err != nil {
		return 0, err
	}
	ef, err := follower.Election(key)
	if err != nil {
		return 0, err
	}
	if _, err := el.Campaign(ctx, "leader"); err != nil {
		return 0, fmt.Errorf("leader's campaign: %w", err)
	}
	type result struct {
		at  time.Time
		err error
	}
	won := make(chan result, 1)
	go func() {
		l, err := ef.Campaign(ctx, "follower")
		at := time.Now()
		if err == nil {
			_ = l.Unlock(context.WithoutCancel(ctx))
		}
		won <- result{at, err}
	}()

	// The core renews every third of the TTL: crashing a random time into
	// the second period leaves the lock between 2/3 and all of its TTL to
	// run, and gives the follower a third of the TTL to be waiting.
	period := ttl / 3
	timer := time.NewTimer(period + rand.N(period))
	select {
	case <-timer.C:
	case w := <-won:
		timer.Stop()
		return 0, fmt.Errorf("the follower led while the leader did: %v", w.err)
	case <-ctx.Done():
		timer.Stop()
		return 0, ctx.Err()
	}
	gone, vanish := context.WithCancel(ctx)
	vanish() // an ended context: Close releases nothing, and closes the connections
	crash := time.Now()
	crashed = true
	_ = leader.Close(gone)
	w := <-won
	if w.err != nil {
		return 0, fmt.Errorf("follower's campaign after the crash: %w", w.err)
	}
	return w.at.Sub(crash), nil
}
