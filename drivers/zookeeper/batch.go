package zookeeper

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/driver"
)

// A batch's checks go out in multis of at most batchOps operations and
// batchBytes bytes of request. The byte budget is what keeps a multi valid:
// the server drops the connection (and with it every request in flight) on
// a request larger than jute.maxbuffer, 1 MiB by default, and the client
// library refuses to encode one over 1.5 MiB. Half the default leaves room
// for the transaction's own framing, which the leader logs and sends to its
// followers under the same limit. An operation costs 17 bytes plus its path:
// with ordinary keys (paths of about 100 bytes) the 1,000-operation cap
// comes first, at about 120 KB; with the longest keys (a 1024-byte key
// escapes to 3072 bytes) the byte budget does, at about 160 operations. The
// cap keeps each multi a modest transaction for the leader, which applies
// it as one unit, and bounds what a failed multi makes the Driver resend.
const (
	batchOps   = 1000
	batchBytes = 512 << 10

	// checkOpBytes is a check operation's size in a multi request, beside
	// its path: its header (type, done flag, error: 9 bytes), the path's
	// length prefix (4) and the version (4).
	checkOpBytes = 17
)

// A multi stops at its first failing operation and says nothing of the ones
// after it, so each failed multi finds one lost lease. After probeAfter
// failed multis in a row the losses look correlated (an operator removed a
// subtree; a client whose reentrant holds ours joined died), and the Driver
// probes the rest of the multi's leases with plain reads, probeParallelism
// in flight, before resending it, rather than spend a multi per loss. Reads
// are the cheaper round trips: the connected server answers them from
// memory, while every multi, failed or not, is a transaction that a quorum
// writes to its log.
const (
	probeAfter       = 2
	probeParallelism = 64
)

// extendParallelism bounds the Extend calls in flight when a failed multi
// does not say which operation failed, and each lease is checked alone.
const extendParallelism = 16

var errForeignLease = errors.New("zookeeper: lease not made by this driver")

// pending is a lease of a batch, and its index in the batch.
type pending struct {
	l *lease
	i int
}

// ExtendBatch confirms many leases with one multi of version checks per
// chunk of batchOps operations (or batchBytes of request): each lease's
// checks are the ones Extend sends, and they pass together in one
// linearizable transaction through the leader. Each lease gets what Extend
// would have returned for it.
//
// A multi is atomic: one missing node fails it all. Its per-operation
// results name the first failing operation; the leases before it passed
// their checks in that same transaction and are confirmed, the lease it
// belongs to gets its error (ErrNotHeld for a missing node, losing the
// lease), and the leases after it are sent again; after probeAfter failed
// multis in a row, reads look for other lost leases among them first. An
// expired session concerns every lease of the batch, all of which rest on
// it; so do a connection failure, ctx's end and Close, as they would each
// Extend. While the client is disconnected every lease fails at once with
// ErrDisconnected. Leases not made by d get an error saying so.
func (d *Driver) ExtendBatch(ctx context.Context, leases []driver.Lease, ttls []time.Duration) []error {
	errs := make([]error, len(leases))
	var queue []pending
	for i, dl := range leases {
		l, ok := dl.(*lease)
		if !ok || l == nil || l.d != d {
			errs[i] = errForeignLease
			continue
		}
		queue = append(queue, pending{l, i})
	}
	misses := 0 // failed multis in a row that found a lost lease
	for len(queue) > 0 {
		if err := d.enter(ctx); err != nil {
			for _, p := range queue {
				errs[p.i] = err
			}
			break
		}
		var chunk []pending
		var ops []any
		chunk, ops, queue = nextChunk(queue, errs)
		if len(chunk) == 0 {
			continue
		}
		started := time.Now()
		var resps []zk.MultiResponse
		err := d.call(ctx, func() (err error) {
			resps, err = d.conn.Multi(ops...)
			return err
		})
		if err == nil || errors.Is(err, zk.ErrSessionExpired) || !answered(err) {
			// Success, or a failure that concerns every lease alike: the
			// session, the connection, ctx or Close. (Only an answered
			// error says that the multi returned, so that resps may be
			// read.)
			if err == nil {
				misses = 0
			}
			for _, p := range chunk {
				errs[p.i] = p.l.checked(err, started, ttls[p.i])
			}
			continue
		}
		k := failedOp(err, resps, len(ops))
		if k < 0 {
			// A node's answer without saying whose: ask lease by lease.
			d.extendEach(ctx, chunk, ttls, errs)
			continue
		}
		n := 0 // operations of the leases before p
		for j, p := range chunk {
			m := len(p.l.checks())
			if n+m <= k {
				errs[p.i] = p.l.checked(nil, started, ttls[p.i])
				n += m
				continue
			}
			errs[p.i] = p.l.checked(resps[k].Error, started, ttls[p.i])
			rest := chunk[j+1:]
			if misses++; misses >= probeAfter {
				rest = d.probe(ctx, rest, ttls, errs)
			}
			queue = append(rest[:len(rest):len(rest)], queue...)
			break
		}
	}
	return errs
}

// nextChunk takes from the front of queue the leases of the next multi,
// within batchOps operations and batchBytes bytes, and returns them, their
// operations, and what is left of queue. Leases that cannot be extended now
// get their error at once, as Extend would give it, and are left out: each
// is looked at just before its multi is sent, as Extend looks just before
// its own.
func nextChunk(queue []pending, errs []error) (chunk []pending, ops []any, rest []pending) {
	size := 0
	for len(queue) > 0 {
		p := queue[0]
		checks := p.l.checks()
		n := 0
		for _, c := range checks {
			n += checkOpBytes + len(c.(*zk.CheckVersionRequest).Path)
		}
		// A lease is never split; one alone always goes, whatever its size.
		if len(ops) > 0 && (len(ops)+len(checks) > batchOps || size+n > batchBytes) {
			break
		}
		queue = queue[1:]
		if err := p.l.extendable(); err != nil {
			errs[p.i] = err
			continue
		}
		chunk, ops, size = append(chunk, p), append(ops, checks...), size+n
	}
	return chunk, ops, queue
}

// failedOp returns the index of the operation that failed a multi of n
// operations with err, by its per-operation results: the operations before
// it report no error, and the failing one reports err. It returns -1 when
// the results do not have that shape (the server sent none).
func failedOp(err error, resps []zk.MultiResponse, n int) int {
	if err == nil || len(resps) != n {
		return -1
	}
	for k, r := range resps {
		if r.Error != nil {
			if !errors.Is(r.Error, err) {
				return -1
			}
			return k
		}
	}
	return -1
}

// extendEach extends each lease of ps on its own, a few at a time.
func (d *Driver) extendEach(ctx context.Context, ps []pending, ttls []time.Duration, errs []error) {
	sem := make(chan struct{}, extendParallelism)
	var wg sync.WaitGroup
	for _, p := range ps {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[p.i] = p.l.Extend(ctx, ttls[p.i])
		})
	}
	wg.Wait()
}

// probe looks with plain reads for the leases of ps whose lock or entry node
// is gone, loses them with Extend's ErrNotHeld, and returns the others. A
// read that finds no node is proof: node names are unique (request ID and
// sequence number), so a node that existed never comes back, and a client
// never sees an older state of the tree than it has seen, which includes the
// node's creation. A read that finds the node proves nothing (it may be
// served from a follower's older state), so the others still go through a
// multi; a failed read leaves the lease to it too.
func (d *Driver) probe(ctx context.Context, ps []pending, ttls []time.Duration, errs []error) []pending {
	gone := make([]bool, len(ps))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(probeParallelism, len(ps)) {
		wg.Go(func() {
			for j := range next {
				gone[j] = d.vanished(ctx, ps[j].l)
			}
		})
	}
	for j := range ps {
		next <- j
	}
	close(next)
	wg.Wait()
	var kept []pending
	for j, p := range ps {
		if gone[j] {
			errs[p.i] = p.l.checked(zk.ErrNoNode, time.Now(), ttls[p.i])
			continue
		}
		kept = append(kept, p)
	}
	return kept
}

// vanished reports whether a read finds l's lock node or entry node gone.
func (d *Driver) vanished(ctx context.Context, l *lease) bool {
	for _, c := range l.checks() {
		path := c.(*zk.CheckVersionRequest).Path
		var exists bool
		err := d.call(ctx, func() (err error) {
			exists, _, err = d.conn.Exists(path)
			return err
		})
		if err == nil && !exists {
			return true
		}
	}
	return false
}
