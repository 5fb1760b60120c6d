package testserver

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// exchange sends request to the server at addr over a raw TCP connection and
// returns what read takes from the reply. Readiness probes use it so that
// they do not depend on the client libraries under test. ctx bounds the whole
// exchange.
func exchange(ctx context.Context, addr, request string, read func(*bufio.Reader) (string, error)) (string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	// Deadlines, not ctx, bound reads and writes on a net.Conn; without one
	// a probe of a paused server would hang forever.
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(5 * time.Second)
	}
	if err := conn.SetDeadline(deadline); err != nil {
		return "", err
	}
	// A cancelled ctx without a deadline must end the exchange too.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	if _, err := io.WriteString(conn, request); err != nil {
		return "", err
	}
	return read(bufio.NewReader(conn))
}

// firstLine reads one reply line, without its line ending.
func firstLine(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	return strings.TrimRight(line, "\r\n"), err
}

// everything reads the reply until the server closes the connection.
func everything(r *bufio.Reader) (string, error) {
	b, err := io.ReadAll(r)
	return string(b), err
}

// expectLine sends request and checks that the first reply line satisfies
// ok, naming what in errors.
func expectLine(ctx context.Context, what, addr, request string, ok func(string) bool, want string) error {
	line, err := exchange(ctx, addr, request, firstLine)
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, addr, err)
	}
	if !ok(line) {
		return fmt.Errorf("%s %s: got %q, want %s", what, addr, line, want)
	}
	return nil
}
