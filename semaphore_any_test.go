package dlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/drivers/memory"
)

// countingAny counts a driver's Acquire and AcquireAny calls.
type countingAny struct {
	driver.Driver
	acquires, anys atomic.Int64
}

func (d *countingAny) Capabilities() driver.Capabilities {
	c := d.Driver.Capabilities()
	c.AnyAcquirer = d
	return c
}

func (d *countingAny) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	d.acquires.Add(1)
	return d.Driver.Acquire(ctx, req)
}

func (d *countingAny) AcquireAny(ctx context.Context, reqs []driver.Request) (driver.Lease, int, error) {
	d.anys.Add(1)
	return d.Driver.Capabilities().AnyAcquirer.AcquireAny(ctx, reqs)
}

// With an AnyAcquirer, a TryAcquire costs one request whatever the number
// of permits held, and takes the free one.
func TestSemaphoreTryAcquireIsOneRequest(t *testing.T) {
	b := memory.NewBackend()
	ctx := t.Context()
	others := semaphore(t, newClient(t, b), "jobs", 4)
	held := map[string]bool{}
	for range 3 {
		l, err := others.TryAcquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held[l.Key()] = true
	}
	d := &countingAny{Driver: memory.New(b)}
	s := semaphore(t, newClientOver(t, d), "jobs", 4)
	l, err := s.TryAcquire(ctx)
	if err != nil {
		t.Fatalf("TryAcquire with one permit free: %v", err)
	}
	if held[l.Key()] {
		t.Fatalf("TryAcquire granted %s, which another client holds", l.Key())
	}
	if _, err := s.TryAcquire(ctx); !errors.Is(err, dlock.ErrLocked) {
		t.Fatalf("TryAcquire with every permit held: got %v, want ErrLocked", err)
	}
	if a, n := d.acquires.Load(), d.anys.Load(); a != 0 || n != 2 {
		t.Errorf("two TryAcquire calls made %d Acquire and %d AcquireAny calls, want 0 and 2", a, n)
	}
}
