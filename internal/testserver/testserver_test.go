package testserver

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"
)

// ping sends one PING to addr, bounded by d.
func ping(addr string, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return PingRedis(ctx, addr)
}

// eventually calls check until it returns nil or within has passed, and
// fails t with check's last error then. Faults take effect asynchronously in
// Docker (e.g. its port proxy goes away after the container stops), so the
// tests poll with a deadline instead of sleeping.
func eventually(t *testing.T, what string, within time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, within, err)
		}
		time.Sleep(20 * time.Millisecond) // poll interval, not synchronisation
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestRedisFaultHooks(t *testing.T) {
	ctx := t.Context()
	t0 := time.Now()
	srv, err := StartRedis(ctx)
	if errors.Is(err, ErrNoDocker) && !Require() {
		t.Skipf("%v (set %s=1 to fail instead)", err, EnvRequire)
	}
	if err != nil {
		t.Fatal(err)
	}
	terminated := false
	t.Cleanup(func() {
		if !terminated {
			if err := srv.Terminate(context.Background()); err != nil {
				t.Error(err)
			}
		}
	})
	t.Logf("redis container ready at %s in %v", srv.Addr(), time.Since(t0).Round(time.Millisecond))
	addr := srv.Addr()
	if host, _, err := net.SplitHostPort(addr); err != nil || host != "127.0.0.1" {
		t.Fatalf("Addr() = %q, want 127.0.0.1:PORT", addr)
	}
	if !srv.Faults() {
		t.Fatal("Faults() = false for a container")
	}

	// Start returned, so the server must answer now, without polling.
	if err := ping(addr, 2*time.Second); err != nil {
		t.Fatalf("PING after Start: %v", err)
	}

	// Paused: the port still accepts, but nothing answers before the deadline.
	if err := srv.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "PING times out while paused", 5*time.Second, func() error {
		if err := ping(addr, 300*time.Millisecond); !isTimeout(err) {
			return errors.New("PING did not time out: " + errString(err))
		}
		return nil
	})
	if err := srv.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "PING works after Resume", 10*time.Second, func() error {
		return ping(addr, time.Second)
	})

	// Stopped: the server is gone and its port refuses connections.
	t1 := time.Now()
	if err := srv.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("Stop took %v", time.Since(t1).Round(time.Millisecond))
	eventually(t, "PING refused after Stop", 10*time.Second, func() error {
		if err := ping(addr, time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
			return errors.New("PING not refused: " + errString(err))
		}
		return nil
	})

	// Started again: ready on return, on the same address.
	t1 = time.Now()
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("restart to ready took %v", time.Since(t1).Round(time.Millisecond))
	if got := srv.Addr(); got != addr {
		t.Fatalf("Addr() after restart = %q, want %q", got, addr)
	}
	if err := ping(addr, 2*time.Second); err != nil {
		t.Fatalf("PING after restart: %v", err)
	}

	// Terminate from a paused state, the hardest case for cleanup.
	if err := srv.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	terminated = true
	if err := srv.Terminate(context.Background()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "PING refused after Terminate", 10*time.Second, func() error {
		if err := ping(addr, time.Second); err == nil {
			return errors.New("PING still answered")
		}
		return nil
	})
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func TestStartRejectsIncompleteSpec(t *testing.T) {
	if _, err := Start(t.Context(), Spec{Name: "x", Image: "y"}); err == nil {
		t.Fatal("Start with no Port and Ready: want an error")
	}
}

func TestRedisTargetExternal(t *testing.T) {
	const url = "redis://127.0.0.1:1/0"
	t.Setenv(EnvRedisURL, url)
	target, err := RedisTarget(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if target.URL != url || target.Server != nil || target.Faults() {
		t.Fatalf("RedisTarget with %s set = %+v, want external %s without faults", EnvRedisURL, target, url)
	}
	if err := target.Close(t.Context()); err != nil {
		t.Fatalf("Close of an external target: %v", err)
	}
}

func TestTargetNeedSkipsWhenMissing(t *testing.T) {
	var skipped bool
	t.Run("missing", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		Target{missing: "no Docker engine"}.Need(t)
	})
	if !skipped {
		t.Fatal("Need on a Target without a server did not skip")
	}
}

func TestRequire(t *testing.T) {
	t.Setenv(EnvRequire, "1")
	if !Require() {
		t.Fatal("Require() = false with DLOCK_REQUIRE_CONTAINERS=1")
	}
	t.Setenv(EnvRequire, "")
	if Require() {
		t.Fatal("Require() = true with DLOCK_REQUIRE_CONTAINERS empty")
	}
}
