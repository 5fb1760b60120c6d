package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/benchkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// ttl is every contender's lock TTL, where its library has one.
const ttl = 8 * time.Second

// sizes sets how much each measurement does.
type sizes struct {
	uncontendedRounds int
	handoffRounds     int
	handoffFor        time.Duration // a handoff run ends after this even short of its rounds
	contendedFor      time.Duration
	contenders        int // independent clients in the contended run
}

// standard runs each cell for about 3 s: the whole comparison in a few
// minutes on two cores.
var standard = sizes{uncontendedRounds: 300, handoffRounds: 300, handoffFor: 3 * time.Second, contendedFor: 3 * time.Second, contenders: 64}

// quick is a smoke run: figures only roughly meaningful.
var quick = sizes{uncontendedRounds: 20, handoffRounds: 20, handoffFor: 500 * time.Millisecond, contendedFor: 300 * time.Millisecond, contenders: 8}

// backend is one server kind and the contenders measured on it.
type backend struct {
	name string
	// start starts the servers and returns the contenders over them and a
	// func that stops them.
	start func(ctx context.Context) (*env, error)
}

// env is a started backend.
type env struct {
	// dlock is the target over the servers; its Requests counts requests
	// on the server side.
	dlock benchkit.Target
	peers []peer
	stop  func()
}

// peer is another library's lock on the backend.
type peer struct {
	name string
	// newLocker makes a contender of key with a client of its own, as
	// another process would have, and a func that closes that client.
	newLocker func(ctx context.Context, key string) (benchkit.Locker, func(), error)
	// requests counts the requests the peer's clients sent; nil: the
	// backend's server-side count (env.dlock.Requests) counts them.
	requests func() uint64
}

// contender makes n lockers of one key: the unit each measurement runs.
type contender struct {
	name string
	// shared: all lockers are goroutines of one client (reported as 1
	// client); else each has a client of its own.
	shared     bool
	newLockers func(ctx context.Context, key string, n int) ([]benchkit.Locker, func(), error)
	requests   func() uint64
}

// contenders are dlock with a client per contender, dlock with one Client
// for all, and each peer with a client per contender.
func (e *env) contenders() []contender {
	dlockLockers := func(clients func(n int) int) func(ctx context.Context, key string, n int) ([]benchkit.Locker, func(), error) {
		return func(ctx context.Context, key string, n int) ([]benchkit.Locker, func(), error) {
			var cs []*dlock.Client
			closeAll := func() {
				for _, c := range cs {
					_ = c.Close(context.WithoutCancel(ctx))
				}
			}
			for range clients(n) {
				c, err := e.dlock.NewClient(ctx, dlock.WithTTL(ttl))
				if err != nil {
					closeAll()
					return nil, nil, err
				}
				cs = append(cs, c)
			}
			ls := make([]benchkit.Locker, n)
			for i := range ls {
				m, err := cs[i%len(cs)].Mutex(key)
				if err != nil {
					closeAll()
					return nil, nil, err
				}
				ls[i] = benchkit.MutexLocker(m)
			}
			return ls, closeAll, nil
		}
	}
	cs := []contender{
		{name: "dlock", newLockers: dlockLockers(func(n int) int { return n }), requests: e.dlock.Requests},
		{name: "dlock, one Client", shared: true, newLockers: dlockLockers(func(int) int { return 1 }), requests: e.dlock.Requests},
	}
	for _, p := range e.peers {
		requests := p.requests
		if requests == nil {
			requests = e.dlock.Requests
		}
		cs = append(cs, contender{name: p.name, newLockers: independent(p.newLocker), requests: requests})
	}
	return cs
}

// independent makes n lockers with newLocker, each with a client of its own.
func independent(newLocker func(ctx context.Context, key string) (benchkit.Locker, func(), error)) func(ctx context.Context, key string, n int) ([]benchkit.Locker, func(), error) {
	return func(ctx context.Context, key string, n int) ([]benchkit.Locker, func(), error) {
		var ls []benchkit.Locker
		var closers []func()
		closeAll := func() {
			for _, c := range closers {
				c()
			}
		}
		for range n {
			l, c, err := newLocker(ctx, key)
			if err != nil {
				closeAll()
				return nil, nil, err
			}
			ls, closers = append(ls, l), append(closers, c)
		}
		return ls, closeAll, nil
	}
}

// newKey returns a key no other measurement uses.
func newKey(what string) string { return "peers/" + what + "/" + rand.Text()[:10] }

// row is one contender's figures on one backend.
type row struct {
	Backend   string `json:"backend"`
	Contender string `json:"contender"`
	// Uncontended acquire+release on one client; nil for the shared dlock
	// row (the same as dlock's).
	Uncontended *benchkit.Latency `json:"uncontended,omitempty"`
	// UncontendedRequests is requests per acquire+release.
	UncontendedRequests float64            `json:"uncontended_requests"`
	Handoff             []benchkit.Handoff `json:"handoff"` // 1 waiter, then 16
	Contended           benchkit.Contended `json:"contended"`
}

// handoffHold is how long a holder keeps the lock in the handoff runs
// once every other contender has called Lock: a waiter's first request
// must reach the server before the release, or a polling lock is timed
// taking a free lock (with the 200 µs of dlock bench, a loaded machine
// showed redislock handing off in 0.4 ms for its 100 ms poll).
const handoffHold = 5 * time.Millisecond

// handoffWaiters are the waiter counts of the handoff measurements.
var handoffWaiters = []int{1, 16}

// measure runs every measurement of every contender of e, telling progress
// what it does: the uncontended cycles of all contenders interleaved, so
// that all see the same machine load; then each contender's handoffs and
// contended run in turn.
func measure(ctx context.Context, name string, e *env, s sizes, progress func(string)) ([]row, error) {
	cs := e.contenders()
	rows := make([]row, len(cs))
	step := func(c contender, what string) { progress(fmt.Sprintf("%s: %s: %s", name, c.name, what)) }
	var ops []func(context.Context) error
	var solo []int // the rows whose uncontended cost is measured
	var dones []func()
	defer func() {
		for _, done := range dones {
			done()
		}
	}()
	for i, c := range cs {
		rows[i] = row{Backend: name, Contender: c.name}
		if c.shared {
			continue // one locker on one client: the same as the row before
		}
		step(c, "requests per uncontended acquire+release")
		ls, done, err := c.newLockers(ctx, newKey("uncontended"), 1)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		dones = append(dones, done)
		if rows[i].UncontendedRequests, err = benchkit.CountRequests(ctx, ls[0], c.requests, min(s.uncontendedRounds, benchkit.RequestRounds)); err != nil {
			return nil, fmt.Errorf("%s: uncontended: %w", c.name, err)
		}
		ops = append(ops, func(ctx context.Context) error { return benchkit.LockUnlock(ctx, ls[0]) })
		solo = append(solo, i)
	}
	progress(name + ": uncontended acquire+release, every contender in turn")
	lat, err := benchkit.Interleaved(ctx, s.uncontendedRounds, ops...)
	if err != nil {
		return nil, fmt.Errorf("uncontended: %w", err)
	}
	for j, i := range solo {
		rows[i].Uncontended = &lat[j]
	}
	for _, done := range dones {
		done() // no idle client's keep-alives in the other runs' request counts
	}
	dones = nil
	if err := warmUp(ctx, name, cs, s, progress); err != nil {
		return nil, err
	}
	for i, c := range cs {
		for _, w := range handoffWaiters {
			step(c, fmt.Sprintf("handoff to %d waiter(s)", w))
			h, err := handoff(ctx, c, w, s)
			if err != nil {
				return nil, fmt.Errorf("%s: handoff to %d: %w", c.name, w, err)
			}
			rows[i].Handoff = append(rows[i].Handoff, h)
		}
		step(c, fmt.Sprintf("%d contenders", s.contenders))
		if rows[i].Contended, err = contended(ctx, c, s); err != nil {
			return nil, fmt.Errorf("%s: contended: %w", c.name, err)
		}
	}
	return rows, nil
}

// warmUp runs every contender's handoffs and contended run once, briefly
// but with as many contenders as s, and throws the figures away. The
// measured runs go contender by contender, dlock first; without this,
// dlock's would be the server's first handoffs and contention at that size
// (ZooKeeper's and Hazelcast's servers are JVMs, whose code runs slowly
// until compiled). On ZooKeeper, measured alternately under load: dlock's
// first handoff run 2.15 ms against zk.Lock's 1.56 ms right after it, and
// within 5% of each other in the three rounds that followed; dlock's first
// contended run 494 critical sections/s, the next 674, zk.Lock's 677 and
// 686 between them.
func warmUp(ctx context.Context, name string, cs []contender, s sizes, progress func(string)) error {
	progress(name + ": warming up, every contender briefly (not measured)")
	w := sizes{handoffRounds: 50, handoffFor: s.handoffFor / 6, contendedFor: s.contendedFor / 3, contenders: s.contenders}
	for _, c := range cs {
		for _, waiters := range handoffWaiters {
			if _, err := handoff(ctx, c, waiters, w); err != nil {
				return fmt.Errorf("%s: warm-up handoff to %d: %w", c.name, waiters, err)
			}
		}
		if _, err := contended(ctx, c, w); err != nil {
			return fmt.Errorf("%s: warm-up contended: %w", c.name, err)
		}
	}
	return nil
}

// handoff measures c's handoffs to waiters waiters.
func handoff(ctx context.Context, c contender, waiters int, s sizes) (benchkit.Handoff, error) {
	ls, done, err := c.newLockers(ctx, newKey("handoff"), waiters+1)
	if err != nil {
		return benchkit.Handoff{}, err
	}
	defer done()
	return benchkit.MeasureHandoffLockers(ctx, ls, benchkit.HandoffOptions{Clients: c.clients(len(ls)), Rounds: s.handoffRounds, Limit: s.handoffFor, Hold: handoffHold, Requests: c.requests})
}

// contended measures c's throughput and fairness with s.contenders lockers.
func contended(ctx context.Context, c contender, s sizes) (benchkit.Contended, error) {
	ls, done, err := c.newLockers(ctx, newKey("contended"), s.contenders)
	if err != nil {
		return benchkit.Contended{}, err
	}
	defer done()
	return benchkit.MeasureContendedLockers(ctx, ls, c.clients(len(ls)), s.contendedFor, c.requests)
}

// clients is how many clients n of c's lockers are spread over.
func (c contender) clients(n int) int {
	if c.shared {
		return 1
	}
	return n
}

// onServer is the start of a backend of one server: it starts the server
// with start, makes dlock's target over it with target and the peers with
// peers (both given the server's address), and stops the server after the
// target's own cleanup.
func onServer(start func(context.Context) (*testserver.Server, error),
	target func(ctx context.Context, addr string) (benchkit.Target, func(), error),
	peers func(addr string) []peer) func(context.Context) (*env, error) {
	return func(ctx context.Context) (*env, error) {
		srv, err := start(ctx)
		if err != nil {
			return nil, err
		}
		t, done, err := target(ctx, srv.Addr())
		if err != nil {
			_ = srv.Terminate(context.WithoutCancel(ctx))
			return nil, err
		}
		return &env{dlock: t, peers: peers(srv.Addr()), stop: func() { done(); _ = srv.Terminate(context.WithoutCancel(ctx)) }}, nil
	}
}
