package etcd

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
)

// proxy is a TCP relay between a client and the etcd server, for faults of
// one client's link only: Block holds every byte in both directions (the
// link goes silent, connections stay open, as in a partition), Unblock lets
// them through again.
type proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	blocked bool
	gate    *sync.Cond
	conns   []net.Conn
	closed  bool
	wg      sync.WaitGroup
}

// newProxy relays a new local port to target until tb ends.
func newProxy(tb testing.TB, target string) *proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	p.gate = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	tb.Cleanup(p.close)
	return p
}

// Addr is where clients connect.
func (p *proxy) Addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = c.Close()
			_ = s.Close()
			return
		}
		p.conns = append(p.conns, c, s)
		p.wg.Add(2)
		p.mu.Unlock()
		go p.relay(s, c)
		go p.relay(c, s)
	}
}

// relay copies from src to dst, holding each chunk while the proxy is
// blocked.
func (p *proxy) relay(dst, src net.Conn) {
	defer p.wg.Done()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.blocked && !p.closed {
				p.gate.Wait()
			}
			closed := p.closed
			p.mu.Unlock()
			if closed {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				_ = src.Close()
			}
			return
		}
	}
}

// Block makes the link silent: nothing more is delivered either way.
func (p *proxy) Block() {
	p.mu.Lock()
	p.blocked = true
	p.mu.Unlock()
}

// Unblock delivers what was held, and everything after.
func (p *proxy) Unblock() {
	p.mu.Lock()
	p.blocked = false
	p.gate.Broadcast()
	p.mu.Unlock()
}

func (p *proxy) close() {
	p.mu.Lock()
	p.closed = true
	p.gate.Broadcast()
	conns := p.conns
	p.mu.Unlock()
	_ = p.ln.Close()
	for _, c := range conns {
		_ = c.Close()
	}
	p.wg.Wait()
}
