package zookeeper

import (
	"encoding/binary"
	"io"
	"maps"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// proxy is a TCP proxy in the test process between Drivers and the test
// server, which cuts connections, refuses new ones, and swallows the reply to
// a create: the faults of a network that a paused container cannot mimic
// precisely.
type proxy struct {
	ln     net.Listener
	target string

	mu        sync.Mutex
	pairs     map[*pair]struct{}
	refusing  bool
	armed     bool
	swallowed chan struct{} // closed once a create's reply is being swallowed
	sent      map[int32]int // requests forwarded, by opcode (pings left out)
	wg        sync.WaitGroup
}

// pair is one proxied connection.
type pair struct {
	client, server net.Conn
	swallow        atomic.Bool // drop everything the server sends from now on
}

func newProxy(tb testing.TB, target string) *proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, pairs: map[*pair]struct{}{}, swallowed: make(chan struct{})}
	p.wg.Go(p.accept)
	tb.Cleanup(p.close)
	return p
}

// Addr returns the address Drivers should dial.
func (p *proxy) Addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refusing := p.refusing
		p.mu.Unlock()
		if refusing {
			_ = c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		pr := &pair{client: c, server: s}
		p.mu.Lock()
		p.pairs[pr] = struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.up(pr) })
		p.wg.Go(func() { p.down(pr) })
	}
}

// up forwards the client's requests frame by frame: a 4-byte length, then
// (after the first frame, the connect request) the request header, xid and
// opcode.
func (p *proxy) up(pr *pair) {
	defer p.drop(pr)
	first := true
	var head [4]byte
	for {
		if _, err := io.ReadFull(pr.client, head[:]); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(head[:]))
		if _, err := io.ReadFull(pr.client, body); err != nil {
			return
		}
		if !first && len(body) >= 8 {
			p.count(int32(binary.BigEndian.Uint32(body[:4])), int32(binary.BigEndian.Uint32(body[4:8])))
		}
		var swallowed chan struct{}
		// The Driver creates its queue nodes with a multi (see
		// attempt.createNode), or with a create when it may not write the
		// lock's node.
		op := int32(-1)
		if !first && len(body) >= 8 {
			op = int32(binary.BigEndian.Uint32(body[4:8]))
		}
		if op == opCreate || op == opMulti {
			if swallowed = p.takeArmed(); swallowed != nil {
				pr.swallow.Store(true)
			}
		}
		first = false
		_, err := pr.server.Write(append(head[:], body...))
		if swallowed != nil {
			close(swallowed)
		}
		if err != nil {
			return
		}
	}
}

// down forwards the server's replies, unless they are being swallowed.
func (p *proxy) down(pr *pair) {
	defer p.drop(pr)
	buf := make([]byte, 64<<10)
	for {
		n, err := pr.server.Read(buf)
		if n > 0 && !pr.swallow.Load() {
			if _, err := pr.client.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *proxy) drop(pr *pair) {
	_ = pr.client.Close()
	_ = pr.server.Close()
	p.mu.Lock()
	delete(p.pairs, pr)
	p.mu.Unlock()
}

// count records a request with header xid and op, unless it is a ping
// (xid -2), which the client sends on a timer, not for a lock operation.
func (p *proxy) count(xid, op int32) {
	const pingXid = -2
	if xid == pingXid {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sent == nil {
		p.sent = map[int32]int{}
	}
	p.sent[op]++
}

// requests returns the requests forwarded so far, by opcode, pings left out.
func (p *proxy) requests() map[int32]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.sent)
}

// takeArmed disarms the proxy and returns the channel to close once the
// reply is being swallowed, or nil when the proxy was not armed.
func (p *proxy) takeArmed() chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.armed {
		return nil
	}
	p.armed = false
	return p.swallowed
}

// swallowNextCreate makes the proxy forward the next create request (a
// create or a multi) and
// drop its reply, and everything after it on that connection: the create is
// applied, but the client never hears of it. Swallowed returns a channel
// closed once that happens.
func (p *proxy) swallowNextCreate() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = true
	p.swallowed = make(chan struct{})
	return p.swallowed
}

// cut closes every proxied connection, as a network failure would.
func (p *proxy) cut() {
	p.mu.Lock()
	pairs := make([]*pair, 0, len(p.pairs))
	for pr := range p.pairs {
		pairs = append(pairs, pr)
	}
	p.mu.Unlock()
	for _, pr := range pairs {
		_ = pr.client.Close()
		_ = pr.server.Close()
	}
}

// refuse makes the proxy close new connections at once (on) or forward them
// again (off).
func (p *proxy) refuse(on bool) {
	p.mu.Lock()
	p.refusing = on
	p.mu.Unlock()
}

func (p *proxy) close() {
	_ = p.ln.Close()
	p.cut()
	p.wg.Wait()
}
