package testserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

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
	servers := make([]*Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			spec := RedisSpec()
			spec.Name = fmt.Sprintf("redis-group%d", i)
			servers[i], errs[i] = Start(ctx, spec)
		})
	}
	wg.Wait()
	g := &RedisGroup{}
	for _, s := range servers {
		if s != nil {
			g.Servers = append(g.Servers, s)
		}
	}
	if err := errors.Join(errs...); err != nil {
		_ = g.Terminate(context.WithoutCancel(ctx))
		return nil, err
	}
	return g, nil
}

// Addrs returns the servers' addresses, "127.0.0.1:PORT", in order.
func (g *RedisGroup) Addrs() []string {
	addrs := make([]string, len(g.Servers))
	for i, s := range g.Servers {
		addrs[i] = s.Addr()
	}
	return addrs
}

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
