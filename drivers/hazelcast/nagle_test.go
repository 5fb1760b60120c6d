//go:build linux

package hazelcast

import (
	"net"
	"strconv"
	"syscall"
	"testing"
)

// nagleOn reports whether c's socket has Nagle's algorithm on.
func nagleOn(t *testing.T, c *net.TCPConn) bool {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var soErr error
	if err := raw.Control(func(fd uintptr) { v, soErr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_NODELAY) }); err != nil {
		t.Fatal(err)
	}
	if soErr != nil {
		t.Fatal(soErr)
	}
	return v == 0
}

// nagleDial returns a connection to a listener of the test's own, with
// Nagle's algorithm on (as hazelcast-go-client makes its connections), and
// the listener's port.
func nagleDial(t *testing.T) (*net.TCPConn, int) {
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
			t.Cleanup(func() { _ = c.Close() })
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	tc := c.(*net.TCPConn)
	if err := tc.SetNoDelay(false); err != nil {
		t.Fatal(err)
	}
	return tc, ln.Addr().(*net.TCPAddr).Port
}

// The look for sockets with Nagle's algorithm on turns it off on those to
// the given ports only.
func TestNoDelayToTouchesOnlyTheGivenPorts(t *testing.T) {
	c, port := nagleDial(t)
	other := port + 1
	if other > 65535 {
		other = port - 1
	}
	noDelayTo(map[int]bool{other: true})
	if !nagleOn(t, c) {
		t.Fatal("a socket to another port was changed")
	}
	if n := noDelayTo(map[int]bool{port: true}); n < 1 {
		t.Errorf("noDelayTo changed %d sockets, want at least the test's", n)
	}
	if nagleOn(t, c) {
		t.Fatal("Nagle's algorithm is still on for a socket to a given port")
	}
}

// A Driver made from a URL turns Nagle's algorithm off on its client's
// connections, which hazelcast-go-client v1.6.0 turns on (see nagle.go), and
// knows the member's port from the URL; a wait looks again for connections
// opened since, at most once a second.
func TestOwnedClientWithoutNagle(t *testing.T) {
	u := memberURL(t, testMapName())
	_, p, err := net.SplitHostPort(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	d := openMember(t, testMapName())
	if d.nagle == nil {
		t.Fatal("a Driver made from a URL does not look for its client's sockets")
	}
	d.nagle.mu.Lock()
	known := d.nagle.ports[port]
	d.nagle.mu.Unlock()
	if !known {
		t.Fatalf("the Driver does not know the member's port %d", port)
	}
	if n := noDelayTo(map[int]bool{port: true}); n != 0 {
		t.Errorf("after open, %d connections to the member still had Nagle's algorithm on", n)
	}
	// A connection opened later, to a member's port, is found by the
	// next look.
	c, lport := nagleDial(t)
	d.nagle.addAddress(net.JoinHostPort("127.0.0.1", strconv.Itoa(lport)))
	d.nagle.mu.Lock()
	d.nagle.last = d.nagle.last.Add(-nagleEvery)
	d.nagle.mu.Unlock()
	d.nagle.beforeWait()
	if nagleOn(t, c) {
		t.Fatal("a wait did not turn Nagle's algorithm off on a new connection to a member's port")
	}
}

// A Driver over a caller's client leaves the client's connections as they
// are.
func TestCallerClientKeepsNagle(t *testing.T) {
	d, err := New(ctxFor(t), rawClient(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	if d.nagle != nil {
		t.Fatal("a Driver over a caller's client looks for its sockets")
	}
	d.nagle.beforeWait() // nil: does nothing
}
