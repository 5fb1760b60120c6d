package dlock_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/drivers/memory"
)

// BenchmarkCoreCPU measures the core's own cost per critical section over
// the in-process backend, which needs no server: one Client taking and
// giving back a free lock, and independent Clients (one goroutine each, as
// one process per contender would be) contending on one key, waiting in
// the backend's queue (Blocking) or by notifications (WithoutBlocking).
// An op is one Lock and its Unlock. Allocations per op are the robust
// figure: they do not vary with the machine's load, while ns/op does. With
// many Clients waiting, ns/op is mostly the time a released lock takes to
// reach the next goroutine; cpu-ns/op, the process's CPU time per op (the
// backend's and the garbage collector's included), is the client CPU. The
// in-process backend wakes every blocked call at each change, so Blocking
// with many Clients mostly measures that backend.
func BenchmarkCoreCPU(b *testing.B) {
	b.Run("Uncontended", func(b *testing.B) {
		c, err := dlock.New(memory.New(memory.NewBackend()))
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close(context.Background())
		m, err := c.Mutex("bench")
		if err != nil {
			b.Fatal(err)
		}
		ctx := b.Context()
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			l, err := m.Lock(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, name := range []string{"Blocking", "WithoutBlocking"} {
		var opts []memory.Option
		if name == "WithoutBlocking" {
			opts = append(opts, memory.WithoutBlocking())
		}
		for _, clients := range []int{8, 64} {
			b.Run(fmt.Sprintf("%s/clients=%d", name, clients), func(b *testing.B) {
				benchIndependent(b, clients, opts)
			})
		}
	}
}

// benchIndependent runs b.N critical sections on one key, shared out among
// clients Clients of one backend, one goroutine each.
func benchIndependent(b *testing.B, clients int, opts []memory.Option) {
	backend := memory.NewBackend()
	ms := make([]dlock.Mutex, clients)
	for i := range ms {
		c, err := dlock.New(memory.New(backend, opts...))
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close(context.Background())
		if ms[i], err = c.Mutex("bench"); err != nil {
			b.Fatal(err)
		}
	}
	ctx := b.Context()
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b)()
	for _, m := range ms {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				l, err := m.Lock(ctx)
				if err != nil {
					errs <- err
					return
				}
				if err := l.Unlock(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// reportCPU reports the process's CPU time per op (cpu-ns/op) from now to
// when the function it returns is called, where the system tells it.
func reportCPU(b *testing.B) func() {
	start, ok := processCPU()
	return func() {
		if end, _ := processCPU(); ok && b.N > 0 {
			b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
		}
	}
}
