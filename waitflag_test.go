package dlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/drivers/memory"
)

// waitWatcher is a notifying driver that counts the acquisitions it sees,
// those with driver.Request.Wait set apart, and whose Subscribe fails with
// subErr when it is set.
type waitWatcher struct {
	driver.Driver
	subErr   error
	tries    atomic.Int64
	waiting  atomic.Int64
	subTries atomic.Int64
}

// Capabilities: the Notifier below only.
func (d *waitWatcher) Capabilities() driver.Capabilities {
	return driver.Capabilities{Notifier: d}
}

func (d *waitWatcher) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	d.tries.Add(1)
	if req.Wait {
		d.waiting.Add(1)
	}
	return d.Driver.Acquire(ctx, req)
}

func (d *waitWatcher) Subscribe(ctx context.Context, key string) (driver.Subscription, error) {
	d.subTries.Add(1)
	if d.subErr != nil {
		return nil, d.subErr
	}
	return d.Driver.Capabilities().Notifier.Subscribe(ctx, key)
}

// driver.Request.Wait is set only while the waiter holds a subscription for
// the key: its Close is how a driver that queues waiters learns that one
// gave up. When subscribing fails (a user without permission for the
// channel), the waiter polls with plain tries.
func TestNoWaitRequestsWithoutSubscription(t *testing.T) {
	noPermission := errors.New("NOPERM User has no permissions to access the channel")
	for name, tc := range map[string]struct {
		subErr   error
		wantWait bool
	}{
		"SubscribeFails": {noPermission, false},
		"Subscribed":     {nil, true}, // the control: the test sees Wait when it is sent
	} {
		t.Run(name, func(t *testing.T) {
			b := memory.NewBackend()
			d := &waitWatcher{Driver: memory.New(b, memory.WithoutBlocking()), subErr: tc.subErr}
			c, err := dlock.New(d, dlock.WithPolling(time.Millisecond, 5*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(t.Context())
			other, _ := dlock.New(memory.New(b))
			defer other.Close(t.Context())
			om, _ := other.Mutex("wait-flag")
			held, err := om.Lock(t.Context())
			if err != nil {
				t.Fatal(err)
			}

			m, _ := c.Mutex("wait-flag")
			got := make(chan error, 1)
			go func() {
				l, err := m.Lock(t.Context())
				if err == nil {
					err = l.Unlock(t.Context())
				}
				got <- err
			}()
			waitUntil(t, "five tries while the lock is held", func() bool { return d.tries.Load() >= 5 })
			if err := held.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Fatalf("Lock: %v", err)
			}
			if waited := d.waiting.Load() > 0; waited != tc.wantWait {
				t.Errorf("requests with Wait: %d of %d tries, want some: %v", d.waiting.Load(), d.tries.Load(), tc.wantWait)
			}
			if tc.subErr != nil && d.subTries.Load() != 1 {
				t.Errorf("subscribed %d times after a permanent refusal, want once", d.subTries.Load())
			}
		})
	}
}
