package memcache

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

// A restart loses every lock and counter. Every connection in the client's
// pool is dead then; the driver gets past them to a new connection instead
// of failing, the holder learns of the loss at its next Extend, and tokens
// keep rising (the counter starts again from the clock).
func TestServerRestart(t *testing.T) {
	server.NeedFaults(t)
	mc := newMC(t) // 4 idle connections
	d := newTestDriver(t, mc)
	key := testkit.Key(t)

	// Fill the pool with idle connections.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { _, _ = mc.Get("warm-up") })
	}
	wg.Wait()
	before := mustAcquire(t, d, reqFor(key))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := server.Server.Restart(ctx); err != nil {
		t.Fatal(err)
	}

	if err := before.Extend(ctxFor(t), testTTL); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("Extend after a restart that lost the lock: got %v, want ErrNotHeld", err)
	}
	after := mustAcquire(t, d, reqFor(key))
	if after.Token() <= before.Token() {
		t.Fatalf("token after the restart %d, not above %d from before it", after.Token(), before.Token())
	}
	if err := after.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
}

// gomemcache takes no context, so Release and Extend return when their
// context ends and finish in the background; Close waits for them, and
// leaves no goroutine behind.
func TestPausedServer(t *testing.T) {
	server.NeedFaults(t)
	mc := newMC(t)
	mc.Timeout = time.Second
	d, err := New(mc)
	if err != nil {
		t.Fatal(err)
	}
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"))
	l := mustAcquire(t, d, reqFor(testkit.Key(t)))

	if err := server.Server.Pause(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	paused := true
	defer func() {
		if paused {
			_ = server.Server.Resume(context.Background())
		}
	}()
	for name, op := range map[string]func(context.Context) error{
		"Release": l.Release,
		"Extend":  func(ctx context.Context) error { return l.Extend(ctx, testTTL) },
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		start := time.Now()
		err := op(ctx)
		cancel()
		if err != context.DeadlineExceeded {
			t.Errorf("%s on a paused server: got %v, want exactly context.DeadlineExceeded", name, err)
		}
		if took := time.Since(start); took > 500*time.Millisecond {
			t.Errorf("%s on a paused server returned after %v, want at its context's deadline", name, took)
		}
	}
	// Acquire cannot return early: it is bounded by the client's Timeout.
	start := time.Now()
	if _, err := d.Acquire(ctxFor(t), reqFor(testkit.Key(t))); err == nil {
		t.Error("Acquire on a paused server succeeded")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Acquire on a paused server took %v, want the client's Timeout", took)
	}

	start = time.Now()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Close waited %v for the background operations, want about the client's Timeout", took)
	}
	if err := server.Server.Resume(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	paused = false
}
