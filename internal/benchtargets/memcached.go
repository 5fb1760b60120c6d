package benchtargets

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/dlock-go/dlock/internal/benchkit"
)

// Memcached is the memcached server at url (memcache://host:port; the
// memcached driver must be imported). Raw is add then delete; requests are
// counted by the server (stats), so on a dedicated server they are the
// benchmark's own. The returned func closes the stats connection.
func Memcached(rawURL string) (benchkit.Target, func(), error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" || strings.Contains(u.Host, ",") {
		return benchkit.Target{}, nil, fmt.Errorf("want memcache://host:port with one server, got %q", rawURL)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "11211")
	}
	raw := memcache.New(addr)
	stats := &statsConn{addr: addr}
	t := Open("memcached", rawURL)
	t.Raw = func(_ context.Context, key string) error {
		k := "raw-" + key[strings.LastIndexByte(key, '/')+1:]
		if err := raw.Add(&memcache.Item{Key: k, Value: []byte("raw"), Expiration: 15}); err != nil {
			return err
		}
		return raw.Delete(k)
	}
	t.Requests = stats.requests
	t.MinTTL = 5 * time.Second // whole-second expiry; see the driver's MinTTL
	return t, func() { _ = raw.Close(); stats.close() }, nil
}

// statsConn reads the server's request counters over one connection.
type statsConn struct {
	addr string
	mu   sync.Mutex
	conn net.Conn
}

// counters are the stats that count requests: every storage, retrieval,
// touch, delete and arithmetic command.
var counters = []string{"cmd_get", "cmd_set", "cmd_touch", "delete_hits", "delete_misses", "incr_hits", "incr_misses", "decr_hits", "decr_misses"}

func (s *statsConn) requests() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil {
		c, err := net.DialTimeout("tcp", s.addr, 5*time.Second)
		if err != nil {
			return 0
		}
		s.conn = c
	}
	_ = s.conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := s.conn.Write([]byte("stats\r\n")); err != nil {
		s.conn.Close()
		s.conn = nil
		return 0
	}
	var n uint64
	sc := bufio.NewScanner(s.conn)
	for sc.Scan() {
		line := sc.Text()
		if line == "END" {
			break
		}
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "STAT" && slices.Contains(counters, f[1]) {
			v, _ := strconv.ParseUint(f[2], 10, 64)
			n += v
		}
	}
	return n
}

func (s *statsConn) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		s.conn.Close()
	}
}
