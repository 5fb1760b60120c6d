package containerfaults

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// echoServer answers every line with the same line, until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// TestProxyCutHoldsAndRestoreDelivers checks the semantics conformance.Link
// documents: a cut holds bytes without closing the connection, and Restore
// delivers them.
func TestProxyCutHoldsAndRestoreDelivers(t *testing.T) {
	p := NewProxy(t, echoServer(t))
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	roundTrip := func(line string, within time.Duration) (string, error) {
		if _, err := c.Write([]byte(line + "\n")); err != nil {
			return "", err
		}
		_ = c.SetReadDeadline(time.Now().Add(within))
		return r.ReadString('\n')
	}
	if got, err := roundTrip("before", 5*time.Second); err != nil || got != "before\n" {
		t.Fatalf("before the cut: got %q, %v", got, err)
	}
	if err := p.Cut(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Nothing comes back while cut, and the connection stays open: the read
	// times out rather than ending.
	got, err := roundTrip("held", 300*time.Millisecond)
	if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("while cut: got %q, %v; want a read timeout", got, err)
	}
	// A new connection is accepted but silent too.
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := c2.Write([]byte("new\n")); err != nil {
		t.Fatal(err)
	}
	if err := p.Restore(t.Context()); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, err := r.ReadString('\n'); err != nil || got != "held\n" {
		t.Fatalf("after Restore: got %q, %v; want the held line delivered", got, err)
	}
	_ = c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, err := bufio.NewReader(c2).ReadString('\n'); err != nil || got != "new\n" {
		t.Fatalf("new connection after Restore: got %q, %v", got, err)
	}
	if got, err := roundTrip("after", 5*time.Second); err != nil || got != "after\n" {
		t.Fatalf("after Restore: got %q, %v", got, err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestProxyRefuseAndReopen checks what the Hazelcast tests' restarts rely
// on: Refuse closes the connections through the proxy and refuses new ones
// (nothing is accepted and then closed), and Reopen serves the same address
// again, from goroutines that do not carry the caller's profiler labels.
func TestProxyRefuseAndReopen(t *testing.T) {
	p, err := StartRefusableProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	addr := p.Addr()
	_, port, _ := net.SplitHostPort(addr)
	if n, err := strconv.Atoi(port); err != nil || n >= 32768 {
		t.Errorf("a refusable proxy listens on %s, in the ephemeral range (32768-60999)", addr)
	}
	echo := func(c net.Conn, line string) (string, error) {
		if _, err := c.Write([]byte(line + "\n")); err != nil {
			return "", err
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		return bufio.NewReader(c).ReadString('\n')
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := echo(c, "before"); err != nil || got != "before\n" {
		t.Fatalf("before Refuse: got %q, %v", got, err)
	}

	if err := p.Refuse(); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a connection through a refused proxy: read %d, %v; want it closed", n, err)
	}
	if c2, err := net.DialTimeout("tcp", addr, 5*time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		if err == nil {
			c2.Close()
		}
		t.Fatalf("dial of a refused proxy: %v, want connection refused", err)
	}
	if err := p.Refuse(); err != nil {
		t.Fatalf("a second Refuse: %v", err)
	}

	pprof.Do(t.Context(), pprof.Labels("proxy-test", "reopen"), func(context.Context) {
		err = p.Reopen()
	})
	if err != nil {
		t.Fatal(err)
	}
	if p.Addr() != addr {
		t.Fatalf("reopened on %s, was %s", p.Addr(), addr)
	}
	c3, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial after Reopen: %v", err)
	}
	defer c3.Close()
	if got, err := echo(c3, "after"); err != nil || got != "after\n" {
		t.Fatalf("after Reopen: got %q, %v", got, err)
	}
	var buf bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
	if strings.Contains(buf.String(), `"proxy-test":"reopen"`) {
		t.Errorf("goroutines of the reopened proxy carry the caller's labels:\n%s", buf.String())
	}
	if err := p.Reopen(); err != nil {
		t.Fatalf("a second Reopen: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Reopen(); err == nil {
		t.Error("Reopen of a closed proxy: no error")
	}
}

// FreePort never hands out a port twice in one process, even to callers
// racing each other (the nodes of a cluster start at once).
func TestFreePortOnce(t *testing.T) {
	const n = 200
	ports := make(chan int, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			p, err := FreePort()
			if err != nil {
				t.Error(err)
				return
			}
			ports <- p
		})
	}
	wg.Wait()
	close(ports)
	seen := map[int]bool{}
	for p := range ports {
		if seen[p] {
			t.Errorf("port %d handed out twice", p)
		}
		seen[p] = true
	}
}
