package testserver

import (
	"context"
	"fmt"
	"strings"

	"github.com/dlock-go/dlock/conformance"
)

// RedisGroup is a set of independent Redis servers, one container each, that
// know nothing of each other: the masters of a RedLock. Each is a [Server]
// with its own fault hooks.
type RedisGroup struct {
	Servers []*Server
}

// StartRedisGroup starts n Redis containers at once, each on a fixed port
// of its own, and returns when all of them answer. On failure it removes
// those it started. The caller terminates the group with
// [RedisGroup.Terminate].
func StartRedisGroup(ctx context.Context, n int) (*RedisGroup, error) {
	if n < 1 {
		return nil, fmt.Errorf("testserver: a group of %d Redis servers", n)
	}
	servers, err := startEach(n, func(i int) (*Server, error) {
		spec := RedisSpec()
		spec.Name = fmt.Sprintf("redis-group%d", i)
		return Start(ctx, spec)
	})
	g := &RedisGroup{}
	for _, s := range servers {
		if s != nil {
			g.Servers = append(g.Servers, s)
		}
	}
	if err != nil {
		_ = g.Terminate(context.WithoutCancel(ctx))
		return nil, err
	}
	return g, nil
}

// Addrs returns the servers' addresses, "127.0.0.1:PORT", in order.
func (g *RedisGroup) Addrs() []string { return addrsOf(g.Servers) }

// RedLockURL returns the dlock URL of the group as RedLock masters,
// "redlock://ADDR,ADDR,.../0".
func (g *RedisGroup) RedLockURL() string {
	return "redlock://" + strings.Join(g.Addrs(), ",") + "/0"
}

// Each runs f on every server at once (Pause, Stop, Start, ...) and joins
// the errors.
func (g *RedisGroup) Each(ctx context.Context, f func(*Server, context.Context) error) error {
	return eachServer(ctx, g.Servers, f)
}

// FaultHooks returns the hooks of the whole backend, every server at once,
// for a conformance Harness: Pause and Resume act on all of them, Restart
// stops them all, then starts them all.
func (g *RedisGroup) FaultHooks() *conformance.Faults { return eachFaults(g.Each) }

// Terminate removes every server of the group. A nil group is a no-op.
func (g *RedisGroup) Terminate(ctx context.Context) error {
	if g == nil {
		return nil
	}
	return g.Each(ctx, (*Server).Terminate)
}
