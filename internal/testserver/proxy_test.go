package testserver

import (
	"bufio"
	"net"
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
