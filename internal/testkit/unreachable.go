package testkit

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dlock-go/dlock"
)

// The fail-fast checks of dlock.Open, the same for every driver: a backend
// that is down or silent fails Open within its connect timeout, with the
// error shape dlock.Open documents, and leaves no goroutine behind.

// openBound is how long an Open asked for 1 s of connect timeout may take
// before the check calls it a hang: wide room for a loaded machine, and for
// client libraries that notice the end of their context only between
// attempts.
const openBound = 15 * time.Second

// settle is how long the goroutines of a failed Open get to end: some client
// libraries stop theirs in the background after Close returns.
const settle = 5 * time.Second

// ClosedAddr returns a loopback address ("127.0.0.1:PORT") where nothing
// listens, so that connecting is refused: a port the kernel handed out to
// a listener that is closed again.
func ClosedAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("listen: %v", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		tb.Fatalf("close the listener: %v", err)
	}
	return addr
}

// SilentAddr returns the loopback address of a server that accepts every
// connection, reads nothing and answers nothing, until tb ends: a backend
// that hung, or a port proxy whose server is not there.
func SilentAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("listen: %v", err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	tb.Cleanup(func() {
		_ = l.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().String()
}

// NoLeaksAfter is [NoLeaks] for code whose client libraries end some
// goroutines in the background after their Close returns: the check waits
// up to 5 s for them before it fails tb.
func NoLeaksAfter(tb testing.TB, opts ...goleak.Option) {
	tb.Helper()
	opts = append(opts, goleak.IgnoreCurrent())
	tb.Cleanup(func() {
		deadline := time.Now().Add(settle)
		for {
			err := goleak.Find(opts...)
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				tb.Errorf("goroutines left %v after the test: %v", settle, err)
				return
			}
			time.Sleep(50 * time.Millisecond) // polling the runtime, which has no notification
		}
	})
}

// WithQuery returns raw, a URL, with the query parameter name set to value.
func WithQuery(tb testing.TB, raw, name, value string) string {
	tb.Helper()
	u := URL(tb, raw)
	q := u.Query()
	q.Set(name, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// OpenFailsFast checks dlock.Open of the URLs that urlFor makes from an
// address ("127.0.0.1:PORT") of a driver's scheme, against a port where
// nothing listens and against a server that accepts connections and never
// answers: with connect_timeout=1s, Open fails within a generous bound, with
// an error wrapping dlock.ErrUnavailable, and, for the silent server,
// context.DeadlineExceeded; a cancelled context ends it in time too, with
// context.Canceled; a bad connect_timeout is a dlock.ErrInvalidURL. No
// goroutine outlives a failed Open (opts ignores those a client library
// is known to leak).
func OpenFailsFast(t *testing.T, urlFor func(addr string) string, opts ...goleak.Option) {
	t.Helper()
	timeout := func(raw string) string { return WithQuery(t, raw, "connect_timeout", "1s") }
	t.Run("refused", func(t *testing.T) {
		NoLeaksAfter(t, opts...)
		err := openFails(t, context.Background(), timeout(urlFor(ClosedAddr(t))))
		if !errors.Is(err, dlock.ErrUnavailable) {
			t.Errorf("Open where nothing listens: %v, want ErrUnavailable", err)
		}
	})
	t.Run("silent", func(t *testing.T) {
		// The check runs while the server still holds its connections
		// open (cleanups run last first): a goroutine that waits for it
		// must have been stopped by the failed Open, not by the server.
		addr := SilentAddr(t)
		NoLeaksAfter(t, opts...)
		err := openFails(t, context.Background(), timeout(urlFor(addr)))
		if !errors.Is(err, dlock.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Open of a silent server: %v, want ErrUnavailable and context.DeadlineExceeded", err)
		}
		if !strings.Contains(err.Error(), "timed out") {
			t.Errorf("Open of a silent server: %q does not say it timed out", err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		addr := SilentAddr(t)
		NoLeaksAfter(t, opts...)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// Cancelled while Open waits for the server (or before it starts,
		// on a slow machine: either way Open must give up at once).
		stop := time.AfterFunc(200*time.Millisecond, cancel)
		defer stop.Stop()
		// A connect timeout far beyond the bound: only the cancellation
		// can end Open in time.
		err := openFails(t, ctx, WithQuery(t, urlFor(addr), "connect_timeout", "1m"))
		if !errors.Is(err, dlock.ErrUnavailable) || !errors.Is(err, context.Canceled) {
			t.Errorf("Open cancelled: %v, want ErrUnavailable and context.Canceled", err)
		}
	})
	t.Run("bad connect_timeout", func(t *testing.T) {
		raw := urlFor(ClosedAddr(t))
		for _, v := range []string{"soon", "0", "0s", "-1s", "1.5"} {
			_, err := dlock.Open(t.Context(), WithQuery(t, raw, "connect_timeout", v))
			if !errors.Is(err, dlock.ErrInvalidURL) {
				t.Errorf("Open with connect_timeout=%s: %v, want ErrInvalidURL", v, err)
			}
		}
		twice := URL(t, timeout(raw))
		twice.RawQuery += "&connect_timeout=2s"
		if _, err := dlock.Open(t.Context(), twice.String()); !errors.Is(err, dlock.ErrInvalidURL) {
			t.Errorf("Open with connect_timeout twice: %v, want ErrInvalidURL", err)
		}
	})
}

// openFails runs dlock.Open(ctx, raw), which must fail within openBound,
// and returns its error.
func openFails(t *testing.T, ctx context.Context, raw string) error {
	t.Helper()
	type result struct {
		c   *dlock.Client
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := dlock.Open(ctx, raw)
		done <- result{c, err}
	}()
	timer := time.NewTimer(openBound)
	defer timer.Stop()
	select {
	case r := <-done:
		if r.err == nil {
			_ = r.c.Close(context.Background())
			t.Fatalf("Open(%s) succeeded", redacted(raw))
		}
		return r.err
	case <-timer.C:
		t.Fatalf("Open(%s) still running after %v", redacted(raw), openBound)
	}
	return nil
}

// redacted is raw for a test's messages.
func redacted(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return raw
}
