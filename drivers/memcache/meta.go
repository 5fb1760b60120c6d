package memcache

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"
)

// gomemcache sends one command per round trip (except a multi-key get) and
// knows nothing of memcached's meta commands (mg, ms: memcached 1.6 and
// later). The batch renewal needs many owner-checked rewrites in one round
// trip, so this file keeps connections of its own to the servers of a
// client whose selector the Driver knows, and pipelines meta commands on
// them: every command of a round is written at once, and the server answers
// them in order.

// errMetaReply is wrapped by the error of a reply the driver cannot read:
// the connection is dropped, as its stream can no longer be trusted.
var errMetaReply = errors.New("memcached: unexpected meta command reply")

// metaConns is a small pool of connections per server for pipelined meta
// commands.
type metaConns struct {
	sel     gomemcache.ServerSelector
	dial    func(ctx context.Context, network, address string) (net.Conn, error)
	timeout time.Duration
	maxIdle int

	mu     sync.Mutex
	idle   map[string][]*metaConn
	closed bool
}

// metaConn is one connection of the pool.
type metaConn struct {
	nc net.Conn
	rw *bufio.ReadWriter
	// cut is set by a round whose ctx ended as it finished: the deadline in
	// the past that cuts a round short may still land on the connection, at
	// any later moment, so it must not be used again.
	cut bool
}

func newMetaConns(sel gomemcache.ServerSelector, mc *gomemcache.Client) *metaConns {
	timeout := mc.Timeout
	if timeout <= 0 {
		timeout = gomemcache.DefaultTimeout
	}
	dial := mc.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	// A lease's Release and Extend take back the very connection its last
	// write went on (see take), so keep as many idle as the client does.
	idle := max(mc.MaxIdleConns, 2)
	return &metaConns{sel: sel, dial: dial, timeout: timeout, maxIdle: idle, idle: make(map[string][]*metaConn)}
}

// pick returns the server that holds the item name.
func (p *metaConns) pick(name string) (net.Addr, error) {
	return p.sel.PickServer(name)
}

// get returns an idle connection to addr, or dials one, bounded by the
// client's Timeout and ctx.
func (p *metaConns) get(ctx context.Context, addr net.Addr) (*metaConn, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, net.ErrClosed
	}
	if cs := p.idle[addr.String()]; len(cs) > 0 {
		c := cs[len(cs)-1]
		p.idle[addr.String()] = cs[:len(cs)-1]
		p.mu.Unlock()
		return c, nil
	}
	p.mu.Unlock()
	dctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	nc, err := p.dial(dctx, addr.Network(), addr.String())
	if err != nil {
		return nil, err
	}
	return &metaConn{nc: nc, rw: bufio.NewReadWriter(bufio.NewReader(nc), bufio.NewWriter(nc))}, nil
}

// take removes c from the idle connections to addr and reports whether it
// was there: false when c is in use, or was closed.
func (p *metaConns) take(addr net.Addr, c *metaConn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	cs := p.idle[addr.String()]
	for i, x := range cs {
		if x == c {
			p.idle[addr.String()] = append(cs[:i], cs[i+1:]...)
			return true
		}
	}
	return false
}

// put returns a healthy connection to the pool, or closes it (also one
// that a round's ended ctx may still cut).
func (p *metaConns) put(addr net.Addr, c *metaConn) {
	p.mu.Lock()
	if !p.closed && !c.cut && len(p.idle[addr.String()]) < p.maxIdle {
		p.idle[addr.String()] = append(p.idle[addr.String()], c)
		c = nil
	}
	p.mu.Unlock()
	if c != nil {
		_ = c.nc.Close()
	}
}

// close closes every idle connection; connections in use are closed when
// put back.
func (p *metaConns) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, cs := range p.idle {
		for _, c := range cs {
			_ = c.nc.Close()
		}
	}
	clear(p.idle)
}

// round writes every command in cmds to c at once and reads one reply per
// command, in order, each bounded with the others by the client's Timeout;
// ctx ending cuts it short. A reply is its first line, split into fields,
// and the data block that follows a VA line.
func (c *metaConn) round(ctx context.Context, timeout time.Duration, cmds []byte, n int, each func(i int, fields [][]byte, data []byte) error) error {
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := c.nc.SetDeadline(deadline); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(time.Unix(1, 0)) })
	defer func() {
		if !stop() {
			// ctx ended and the cut is under way, maybe after this round
			// read its last reply: it would land on the next round's
			// deadline, and fail it with an i/o timeout at once.
			c.cut = true
		}
	}()
	if _, err := c.rw.Write(cmds); err != nil {
		return err
	}
	if err := c.rw.Flush(); err != nil {
		return err
	}
	for i := range n {
		line, err := c.rw.ReadSlice('\n')
		if err != nil {
			return err
		}
		fields := splitFields(line)
		if len(fields) == 0 {
			return fmt.Errorf("%w: an empty line", errMetaReply)
		}
		var data []byte
		if string(fields[0]) == "VA" {
			if len(fields) < 2 {
				return fmt.Errorf("%w: %q", errMetaReply, line)
			}
			size, err := strconv.Atoi(string(fields[1]))
			if err != nil || size < 0 || size > 1<<20 {
				return fmt.Errorf("%w: %q", errMetaReply, line)
			}
			// fields point into the reader's buffer: copy them first.
			fields = splitFields(append([]byte(nil), line...))
			data = make([]byte, size+2)
			if _, err := io.ReadFull(c.rw, data); err != nil {
				return err
			}
			if string(data[size:]) != "\r\n" {
				return fmt.Errorf("%w: a value not ended by CR LF", errMetaReply)
			}
			data = data[:size]
		}
		if err := each(i, fields, data); err != nil {
			return err
		}
	}
	return nil
}

// splitFields splits a reply line on spaces, without its CR LF.
func splitFields(line []byte) [][]byte {
	var out [][]byte
	start := -1
	for i, b := range line {
		if b == ' ' || b == '\r' || b == '\n' {
			if start >= 0 {
				out = append(out, line[start:i])
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		out = append(out, line[start:])
	}
	return out
}
