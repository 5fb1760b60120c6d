package testserver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"

	"github.com/dlock-go/dlock/conformance"
)

// Own starts servers of tb's own (a cluster, a group of masters) with
// start, which timeout bounds, and terminates them, within a minute, when
// tb ends. A failed start or termination fails tb.
func Own[S interface{ Terminate(context.Context) error }](tb testing.TB, timeout time.Duration, start func(context.Context) (S, error)) S {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	s, err := start(ctx)
	if err != nil {
		tb.Fatalf("start the test's own servers: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.Terminate(ctx); err != nil {
			tb.Errorf("terminate the test's own servers: %v", err)
		}
	})
	return s
}

// eachServer runs f on every server of servers (nil ones left out) at once
// and joins the errors.
func eachServer(ctx context.Context, servers []*Server, f func(*Server, context.Context) error) error {
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		if s != nil {
			wg.Go(func() { errs[i] = f(s, ctx) })
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// eachFaults returns the fault hooks of a backend made of several servers,
// each of which each applies a function to: Pause and Resume act on every
// server at once, and Restart stops them all, then starts them all.
func eachFaults(each func(context.Context, func(*Server, context.Context) error) error) *conformance.Faults {
	return &conformance.Faults{
		Pause:  func(ctx context.Context) error { return each(ctx, (*Server).Pause) },
		Resume: func(ctx context.Context) error { return each(ctx, (*Server).Resume) },
		Restart: func(ctx context.Context) error {
			if err := each(ctx, (*Server).Stop); err != nil {
				return err
			}
			return each(ctx, (*Server).Start)
		},
	}
}

// startEach starts n servers at once, server i with start(i), and joins the
// errors. A server that did not start is nil; the caller terminates those
// that did.
func startEach(n int, start func(i int) (*Server, error)) ([]*Server, error) {
	servers := make([]*Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { servers[i], errs[i] = start(i) })
	}
	wg.Wait()
	return servers, errors.Join(errs...)
}

// startNamed starts the n members of a cluster at once on a Docker network
// of their own (see clusterNetwork: image, labelled label), where member i
// is named prefix followed by i+1, each with start; then it waits, member
// after member, until ready(members, i). On failure it removes what it
// started, network included, and adds the log tail of the member that was
// not ready to the error.
func startNamed(ctx context.Context, image, label, prefix string, n int,
	start func(ctx context.Context, nw *testcontainers.DockerNetwork, names []string, i int) (*Server, error),
	ready func(ctx context.Context, members []*Server, i int) error,
) ([]*Server, *testcontainers.DockerNetwork, error) {
	nw, err := clusterNetwork(ctx, image, label, label)
	if err != nil {
		return nil, nil, err
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s%d", prefix, i+1)
	}
	members, err := startEach(n, func(i int) (*Server, error) { return start(ctx, nw, names, i) })
	for i := 0; err == nil && i < n; i++ {
		if err = ready(ctx, members, i); err != nil {
			err = fmt.Errorf("%w%s", err, members[i].logTail(ctx))
		}
	}
	if err != nil {
		_ = terminateAll(context.WithoutCancel(ctx), members, nw)
		return nil, nil, err
	}
	return members, nw, nil
}

// addrsOf returns the addresses of servers, nil ones left out, in order.
func addrsOf(servers []*Server) []string {
	addrs := make([]string, 0, len(servers))
	for _, s := range servers {
		if s != nil {
			addrs = append(addrs, s.Addr())
		}
	}
	return addrs
}

// terminateAll terminates servers, and then removes nw when it is not nil.
func terminateAll(ctx context.Context, servers []*Server, nw *testcontainers.DockerNetwork) error {
	err := eachServer(ctx, servers, (*Server).Terminate)
	if nw != nil {
		err = errors.Join(err, nw.Remove(ctx))
	}
	return err
}
