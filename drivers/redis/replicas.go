package redis

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/urlparams"
)

// ErrNotReplicated is wrapped by the error of a grant or renewal that fewer
// replicas acknowledged than [WithReplicaAcks] asks for: the master applied
// it, but a failover could lose it. A refused grant is released before
// Acquire returns; a refused renewal leaves the lease uncertain, and lost
// at its deadline unless a later renewal is acknowledged. The error is
// transient: a waiting Lock keeps trying.
var ErrNotReplicated = errors.New("redis: not acknowledged by enough replicas")

// Query parameters of the replica acknowledgements ([WithReplicaAcks]).
const (
	acksParam       = "replica_acks"        // n, a whole number
	ackTimeoutParam = "replica_ack_timeout" // timeout, a Go duration
)

// replicaAcks is what WithReplicaAcks sets: n replicas (0: no WAIT), within
// timeout (0: defaultAckTimeout of the request's TTL).
type replicaAcks struct {
	n       int
	timeout time.Duration
}

// WithReplicaAcks makes every grant, transfer and renewal of the Driver
// wait, after its script and on the same connection, until n replicas of
// the master acknowledged it (Redis WAIT n timeout): a failover to one of
// those replicas then keeps the lock. When fewer acknowledge it within
// timeout, the grant is released and Acquire fails with
// [ErrNotReplicated], and a renewal fails with it, which the core treats as
// any failed renewal (the lease is uncertain, and lost at its deadline
// unless a later renewal is acknowledged).
//
// n must not exceed the replicas the master has, or every grant fails; to
// keep a lock across a failover to any replica, n is the number of replicas
// (Sentinel promotes one of them, not necessarily one that acknowledged).
// A timeout of 0 means a quarter of the request's TTL, at most 1 s; any
// timeout is cut to half the TTL, so that a grant never comes back with
// less than half its lease, and must stay below go-redis's read timeout
// (3 s unless the URL's read_timeout says otherwise). The wait costs every
// grant and renewal one replication round trip (see "Replica
// acknowledgements" in the package documentation for measured figures).
// A Driver over a Cluster refuses it: WAIT counts one node's replicas, and
// a Cluster's keys live on many. RedLock ignores it.
func WithReplicaAcks(n int, timeout time.Duration) Option {
	return func(o *options) error {
		if n < 1 || timeout < 0 {
			return fmt.Errorf("%w: redis replica acknowledgements: want n ≥ 1 and a timeout ≥ 0, not %d and %v", dlock.ErrInvalidOption, n, timeout)
		}
		o.acks = replicaAcks{n: n, timeout: timeout}
		return nil
	}
}

// timeoutFor is the WAIT timeout of a request with ttl: see
// WithReplicaAcks.
func (a replicaAcks) timeoutFor(ttl time.Duration) time.Duration {
	t := a.timeout
	if t == 0 {
		t = min(ttl/4, time.Second)
	}
	return max(min(t, ttl/2), time.Millisecond)
}

// takeReplicaAcks moves the replica_acks and replica_ack_timeout
// parameters, when q has them, from q to o.
func takeReplicaAcks(q url.Values, o *options) error {
	n, ok, err := urlparams.Take(q, acksParam)
	if err != nil {
		return err
	}
	t, tok, err := urlparams.Take(q, ackTimeoutParam)
	if err != nil || (!ok && !tok) {
		return err
	}
	if !ok {
		return fmt.Errorf("%s without %s", ackTimeoutParam, acksParam)
	}
	acks := replicaAcks{}
	if acks.n, err = strconv.Atoi(n); err != nil || acks.n < 1 {
		return fmt.Errorf("%s %q: want a whole number of replicas, at least 1", acksParam, n)
	}
	if tok {
		if acks.timeout, err = time.ParseDuration(t); err != nil || acks.timeout < time.Millisecond {
			return fmt.Errorf("%s %q: want a duration of at least 1ms, as in 100ms", ackTimeoutParam, t)
		}
	}
	o.acks = acks
	return nil
}

// ackedClient is the client of one call of a Driver with replica
// acknowledgements: every script it runs, and every pipeline, is followed
// by WAIT on the same connection (go-redis runs a pipeline on one, and WAIT
// counts the writes of its own connection), and it keeps the worst outcome
// of those WAITs for the caller to check with [ackedClient.shortfall].
// Script.Run falls back from EVALSHA to EVAL through it, so a WAIT follows
// whichever ran. It is not safe for concurrent use: each call makes its own.
type ackedClient struct {
	goredis.UniversalClient
	n       int
	timeout time.Duration
	waits   int   // WAITs sent
	acked   int64 // the fewest replicas a WAIT counted
	err     error // the first WAIT's error, or nil
}

// ackedFor returns the client a call with ttl sends its writes through:
// d.client itself without acknowledgements.
func (d *Driver) ackedFor(ttl time.Duration) (goredis.UniversalClient, *ackedClient) {
	if d.acks.n == 0 {
		return d.client, nil
	}
	a := &ackedClient{UniversalClient: d.client, n: d.acks.n, timeout: d.acks.timeoutFor(ttl)}
	return a, a
}

// Eval runs script, then WAIT.
func (a *ackedClient) Eval(ctx context.Context, script string, keys []string, args ...any) *goredis.Cmd {
	return a.then(ctx, func(p goredis.Pipeliner) *goredis.Cmd { return p.Eval(ctx, script, keys, args...) })
}

// EvalSha runs the script of sha1, then WAIT.
func (a *ackedClient) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *goredis.Cmd {
	return a.then(ctx, func(p goredis.Pipeliner) *goredis.Cmd { return p.EvalSha(ctx, sha1, keys, args...) })
}

// then pipelines the script that queue adds and WAIT, and returns the
// script's command.
func (a *ackedClient) then(ctx context.Context, queue func(goredis.Pipeliner) *goredis.Cmd) *goredis.Cmd {
	var cmd *goredis.Cmd
	_, _ = a.Pipelined(ctx, func(p goredis.Pipeliner) error {
		cmd = queue(p)
		return nil
	})
	return cmd
}

// Pipelined runs fn's commands, then WAIT, in one pipeline.
func (a *ackedClient) Pipelined(ctx context.Context, fn func(goredis.Pipeliner) error) ([]goredis.Cmder, error) {
	var wait *goredis.Cmd
	cmds, err := a.UniversalClient.Pipelined(ctx, func(p goredis.Pipeliner) error {
		if err := fn(p); err != nil {
			return err
		}
		wait = p.Do(ctx, "WAIT", a.n, a.timeout.Milliseconds())
		return nil
	})
	if wait != nil {
		n, werr := wait.Int64()
		if a.waits == 0 || n < a.acked {
			a.acked = n
		}
		if a.err == nil {
			a.err = werr
		}
		a.waits++
	}
	return cmds, err
}

// shortfall returns nil when the latest WAIT counted enough replicas, and
// otherwise an error wrapping ErrNotReplicated (and WAIT's own error, if
// any), marked transient.
func (a *ackedClient) shortfall() error {
	switch {
	case a == nil:
		return nil
	case a.waits == 0:
		return notNow{fmt.Errorf("%w: no WAIT was sent", ErrNotReplicated)}
	case a.err != nil:
		return notNow{fmt.Errorf("%w: WAIT: %w", ErrNotReplicated, a.err)}
	case a.acked < int64(a.n):
		return notNow{fmt.Errorf("%w: %d of %d replicas within %v", ErrNotReplicated, a.acked, a.n, a.timeout)}
	}
	return nil
}

// minTTL is the shortest of ttls (0 for none): the WAIT of a batch of
// renewals must fit the shortest lease in it.
func minTTL(ttls []time.Duration) time.Duration {
	if len(ttls) == 0 {
		return 0
	}
	return slices.Min(ttls)
}
