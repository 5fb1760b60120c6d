package zookeeper

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// A server (or a proxy in front of one) that accepts a connection and never
// answers holds the client for at most the session timeout before the
// client library tries again, whatever read deadline the library asks for,
// none included; once the connect response is in, the library's deadlines
// apply as they are.
func TestHandshakeBounded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d := newDriver(defaultOptions(), true)
	const session = 1500 * time.Millisecond
	d.timeout.Store(int64(session))
	dial := func() (client, server net.Conn) {
		t.Helper()
		accepted := make(chan net.Conn, 1)
		go func() {
			c, err := ln.Accept()
			if err == nil {
				accepted <- c
			}
		}()
		c, err := d.dialer()("tcp", ln.Addr().String(), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		server = <-accepted
		t.Cleanup(func() { _ = server.Close() })
		return c, server
	}

	// A silent server.
	c, _ := dial()
	start := time.Now()
	for _, deadline := range []time.Time{start.Add(time.Hour), {}} {
		if err := c.SetReadDeadline(deadline); err != nil {
			t.Fatal(err)
		}
		read := make(chan error, 1)
		go func() {
			_, err := c.Read(make([]byte, 4))
			read <- err
		}()
		select {
		case err := <-read:
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("read from a silent server with deadline %v: %v, want a timeout", deadline, err)
			}
		case <-time.After(session + 5*time.Second):
			_ = c.Close()
			<-read
			t.Fatalf("a read from a silent server with deadline %v was still waiting %v later", deadline, session+5*time.Second)
		}
	}
	// Generous against a loaded machine, and far below the library's own
	// ten receive timeouts (10 s here).
	if took := time.Since(start); took > session+3*time.Second {
		t.Errorf("a silent server held the handshake %v, want about the session timeout (%v)", took, session)
	}

	// A server that answers: once the connect response is in, the
	// library's deadlines apply as they are.
	c, server := dial()
	resp := make([]byte, connectHeadLen)
	binary.BigEndian.PutUint32(resp[8:12], 4000)
	binary.BigEndian.PutUint64(resp[12:20], 7)
	if _, err := server.Write(resp); err != nil {
		t.Fatal(err)
	}
	if err := c.SetReadDeadline(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, connectHeadLen)); err != nil {
		t.Fatalf("reading the connect response: %v", err)
	}
	if got := d.SessionTTL(); got != 4*time.Second {
		t.Errorf("granted session timeout read from the response: %v, want 4s", got)
	}
	if err := c.SetReadDeadline(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 1))
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("a read after the handshake ended early: %v", err)
	case <-time.After(session + time.Second):
	}
	_ = c.Close()
	<-got
}
