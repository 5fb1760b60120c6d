package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

// A restart without persistence loses every lock and counter: the holder
// learns of it at its next Extend, tokens keep rising (from the server
// clock), and the shared pub/sub connection reconnects, resubscribes and
// wakes its subscribers, so notifications keep working.
func TestServerRestart(t *testing.T) {
	server.NeedFaults(t)
	rdb := newRDB(t)
	holder, waiter := newTestDriver(t, rdb), newTestDriver(t, newRDB(t))
	key := testkit.Key(t)

	before := mustAcquire(t, holder, testkit.Request(key, time.Minute))
	sub, err := waiter.Subscribe(ctxFor(t), key)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if !waken(sub, 5*time.Second) {
		t.Fatal("no wake-up when the subscription took effect")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := server.Server.Restart(ctx); err != nil {
		t.Fatal(err)
	}

	// go-redis finds the broken pub/sub connection by its health check (a
	// PING every 3 s when idle) and resubscribes; the confirmation wakes us.
	if !waken(sub, 20*time.Second) {
		t.Fatal("no wake-up after the pub/sub connection came back")
	}

	// The first command on a pooled connection may find it broken; go-redis
	// retries that on a new connection.
	var extendErr error
	for i := 0; i < 3 && !errors.Is(extendErr, driver.ErrNotHeld); i++ {
		extendErr = before.Extend(ctx, time.Minute)
	}
	if !errors.Is(extendErr, driver.ErrNotHeld) {
		t.Fatalf("Extend after a restart that lost the lock: got %v, want ErrNotHeld", extendErr)
	}
	after := mustAcquire(t, holder, testkit.Request(key, time.Minute))
	if after.Token() <= before.Token() {
		t.Fatalf("token after the restart %d, not above %d from before it", after.Token(), before.Token())
	}
	if err := after.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if !waken(sub, 5*time.Second) {
		t.Fatal("a release after the restart did not wake the subscriber")
	}
}
