package containerfaults

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// lineConn is a connection to an echo server, read line by line.
type lineConn struct {
	net.Conn
	r *bufio.Reader
}

// send writes line and reads the answer, waiting at most within.
func (c lineConn) send(line string, within time.Duration) (string, error) {
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(within))
	return c.r.ReadString('\n')
}

// receive reads one held line, waiting at most within.
func (c lineConn) receive(within time.Duration) (string, error) {
	_ = c.SetReadDeadline(time.Now().Add(within))
	return c.r.ReadString('\n')
}

func dialLine(t *testing.T, l *Link, addr string) lineConn {
	t.Helper()
	c, err := l.DialContext(t.Context(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return lineConn{c, bufio.NewReader(c)}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestLinkCutsEveryServer checks what the Redis Cluster and RedLock runs of
// the suite rely on: a Link cuts the proxies of every server it dialled,
// and those it makes while cut, and Restore delivers what each held.
func TestLinkCutsEveryServer(t *testing.T) {
	a, b := echoServer(t), echoServer(t)
	l := NewLink(t)
	ca := dialLine(t, l, a)
	if got, err := ca.send("a1", 5*time.Second); err != nil || got != "a1\n" {
		t.Fatalf("before the cut: got %q, %v", got, err)
	}
	if err := l.Cut(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, err := ca.send("a2", 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("while cut: got %q, %v; want a read timeout", got, err)
	}
	// A server first dialled while the link is cut is cut off too.
	cb := dialLine(t, l, b)
	if got, err := cb.send("b1", 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("a new server while cut: got %q, %v; want a read timeout", got, err)
	}
	if err := l.Restore(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, err := ca.receive(5 * time.Second); err != nil || got != "a2\n" {
		t.Fatalf("after Restore: got %q, %v; want the held line", got, err)
	}
	if got, err := cb.receive(5 * time.Second); err != nil || got != "b1\n" {
		t.Fatalf("after Restore, the new server: got %q, %v; want the held line", got, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.DialContext(t.Context(), "tcp", a); err == nil {
		t.Error("dial through a closed link: no error")
	}
}

// stubDriver is a driver.Driver that only remembers how it was opened.
type stubDriver struct {
	driver.Driver
	rawURL string
}

// TestLinkedURL checks the NewLinkedDriver that LinkedURL builds: the
// driver is opened from the URL with the proxy's address, and the proxy is
// closed when the open fails.
func TestLinkedURL(t *testing.T) {
	server := echoServer(t)
	u, _ := url.Parse("test://" + server + "/db?x=1")
	newLinked := LinkedURL(u, func(_ context.Context, u *url.URL) (driver.Driver, error) {
		return stubDriver{rawURL: u.String()}, nil
	})
	d, link, err := newLinked(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = link.Close() })
	p := link.(*Proxy)
	if want := "test://" + p.Addr() + "/db?x=1"; d.(stubDriver).rawURL != want || u.Host != server {
		t.Fatalf("opened from %q, want %q", d.(stubDriver).rawURL, want)
	}

	var proxied string
	failing := LinkedURL(u, func(_ context.Context, u *url.URL) (driver.Driver, error) {
		proxied = u.Host
		return nil, errors.New("refused")
	})
	if _, _, err := failing(t.Context()); err == nil {
		t.Fatal("a failing open: no error")
	}
	addr := proxied
	if c, err := net.DialTimeout("tcp", addr, 5*time.Second); err == nil {
		_ = c.Close()
		t.Errorf("the proxy of a failed open still listens on %s", addr)
	}
}

// TestProxyURL checks that ProxyURL puts the proxy's address in place of
// the one server a URL names, and refuses a URL that names several.
func TestProxyURL(t *testing.T) {
	server := echoServer(t)
	proxied, p, err := ProxyURL("test://user:pw@" + server + "/db?x=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	if want := "test://user:pw@" + p.Addr() + "/db?x=1"; proxied != want {
		t.Errorf("ProxyURL = %q, want %q", proxied, want)
	}
	for _, raw := range []string{"test://a:1,b:2/db", "test:///db", "test://[::1"} {
		if _, p, err := ProxyURL(raw); err == nil {
			_ = p.Close()
			t.Errorf("ProxyURL(%q): no error", raw)
		}
	}
}
