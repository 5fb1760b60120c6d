package memcache

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"
)

// wire watches the requests a gomemcache client sends, through the client's
// DialContext: it counts them, checks that each is well-formed, and can
// interfere with the next request of a given verb. gomemcache writes each
// request with one Flush of its bufio.Writer (4 KiB, more than any request
// here), so one Write on the connection is one request.
type wire struct {
	requests atomic.Int64

	mu        sync.Mutex
	malformed []string
	// after, when set, runs after the next request whose verb is verb was
	// written, and is then cleared.
	verb  string
	after func(c *wireConn)
}

// client returns a gomemcache client of the servers of rawURL whose
// connections w watches.
func (w *wire) client(tb testing.TB, rawURL string) *gomemcache.Client {
	tb.Helper()
	mc := newMCAt(tb, rawURL)
	var d net.Dialer
	mc.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &wireConn{Conn: c, w: w}, nil
	}
	return mc
}

// arm makes f run after the next request with verb has been written.
func (w *wire) arm(verb string, f func(c *wireConn)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.verb, w.after = verb, f
}

// armed reports whether the armed hook has not run yet.
func (w *wire) armed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.after != nil
}

// problems returns the malformed requests seen.
func (w *wire) problems() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.malformed...)
}

type wireConn struct {
	net.Conn
	w      *wire
	broken atomic.Bool
}

func (c *wireConn) Write(b []byte) (int, error) {
	c.w.requests.Add(1)
	verb, problem := checkRequest(b)
	c.w.mu.Lock()
	if problem != "" {
		c.w.malformed = append(c.w.malformed, fmt.Sprintf("%s: %q", problem, b))
	}
	var after func(*wireConn)
	if c.w.after != nil && verb == c.w.verb {
		after, c.w.after = c.w.after, nil
	}
	c.w.mu.Unlock()
	n, err := c.Conn.Write(b)
	if err == nil && after != nil {
		after(c)
	}
	return n, err
}

func (c *wireConn) Read(b []byte) (int, error) {
	if c.broken.Load() {
		return 0, io.EOF
	}
	return c.Conn.Read(b)
}

// breakAfterReply lets the server answer the request just written, then
// makes the connection look closed by the server before the client reads
// the answer: the request was applied, and the client cannot know.
func (c *wireConn) breakAfterReply() {
	_ = c.Conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _ = bufio.NewReader(c.Conn).ReadString('\n') // the answer, lost
	c.broken.Store(true)
	_ = c.Conn.Close()
}

// Token counts of the well-formed request lines the driver sends.
var requestTokens = map[string]int{
	"add": 5, "set": 5, "cas": 6, "gets": 2, "get": 2, "incr": 3, "decr": 3,
	"delete": 2, "touch": 3, "version": 1,
}

// checkRequest returns the verb of the request b and what is wrong with it:
// an unknown verb, a wrong number of tokens, an illegal key, or a data block
// that does not match its declared length.
func checkRequest(b []byte) (verb, problem string) {
	line, rest, ok := bytes.Cut(b, []byte("\r\n"))
	if !ok {
		return "", "no CRLF"
	}
	fields := strings.Split(string(line), " ")
	verb = fields[0]
	want, known := requestTokens[verb]
	switch {
	case !known:
		return verb, "unexpected verb"
	case len(fields) != want:
		return verb, fmt.Sprintf("%d tokens, want %d", len(fields), want)
	case want > 1 && !legalMemcachedKey(fields[1]):
		return verb, "illegal key"
	}
	switch verb {
	case "add", "set", "cas":
		n, err := strconv.Atoi(fields[4])
		if err != nil || len(rest) != n+2 || !bytes.HasSuffix(rest, []byte("\r\n")) {
			return verb, "data block does not match its length"
		}
	default:
		if len(rest) != 0 {
			return verb, "bytes after the request line"
		}
	}
	return verb, ""
}

// legalMemcachedKey is memcached's rule: 1 to 250 bytes, none of them a
// space or a control character (nor, as the driver promises, non-ASCII).
func legalMemcachedKey(k string) bool {
	if k == "" || len(k) > 250 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] <= ' ' || k[i] >= 0x7f {
			return false
		}
	}
	return true
}

// stats returns the server's general statistics, read over a raw
// connection (gomemcache has no stats command).
func stats(tb testing.TB, addr string) map[string]string {
	tb.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		tb.Fatalf("stats: %v", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "stats\r\n"); err != nil {
		tb.Fatalf("stats: %v", err)
	}
	r := bufio.NewReader(c)
	m := map[string]string{}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			tb.Fatalf("stats: %v", err)
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "END" {
			return m
		}
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "STAT" {
			m[f[1]] = f[2]
		}
	}
}

// stat returns one numeric statistic.
func stat(tb testing.TB, addr, name string) int64 {
	tb.Helper()
	v, err := strconv.ParseInt(stats(tb, addr)[name], 10, 64)
	if err != nil {
		tb.Fatalf("stat %s: %v", name, err)
	}
	return v
}
