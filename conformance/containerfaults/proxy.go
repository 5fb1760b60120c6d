package containerfaults

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// Proxy is one client's network link to a server: a TCP proxy on loopback,
// run in the test process by toxiproxy's library, that a test can cut and
// restore. A client dials [Proxy.Addr] instead of the server's address; give
// each client its own Proxy, so that cutting one leaves the others alone. It
// implements conformance.Link.
//
// Cut models a network partition, not a failure of the peers: from then on
// every byte either side sends is held in the proxy, connections stay open
// (nobody is told), and new connections are accepted but get nothing
// through. Restore delivers what was held, in order, and lets everything
// through again: requests the client gave up on reach the server late, as
// they do when a partition heals.
//
// Refuse models the server's host with the server down instead: every
// connection through the proxy is closed and new ones are refused, until
// Reopen listens on the same address again.
type Proxy struct {
	proxy *toxiproxy.Proxy
	addr  string // where it listens, fixed when it starts

	mu      sync.Mutex
	cut     bool
	refused bool
	closed  bool
}

// partitionMillis is how long the toxic that cuts a link holds each byte: longer
// than any test, so that nothing gets through until Restore removes it.
const partitionMillis = 24 * 60 * 60 * 1000

// cutToxics are the toxics of a cut, one per direction: toxiproxy's
// "upstream" is client to server, "downstream" server to client. A latency
// toxic holds data (and a peer's close) and, when removed, delivers what it
// held; a "timeout" toxic would drop it instead, leaving streams that cannot
// resume.
var cutToxics = []string{"cut-upstream", "cut-downstream"}

// NewProxy starts a proxy to upstream (host:port) on a free loopback port.
// It is closed when tb's test ends, if [Proxy.Close] was not called before.
func NewProxy(tb testing.TB, upstream string) *Proxy {
	tb.Helper()
	p, err := StartProxy(upstream)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = p.Close() })
	return p
}

// StartProxy starts a proxy to upstream (host:port) on a free loopback port.
// The caller closes it.
func StartProxy(upstream string) (*Proxy, error) {
	return startProxy("127.0.0.1:0", upstream)
}

// StartRefusableProxy is [StartProxy] for a proxy that will be refused and
// reopened ([Proxy.Refuse], [Proxy.Reopen]): its port is below Linux's
// ephemeral range (as one [FreePort] picks for a container is), so that no outgoing connection
// takes the address while nothing listens on it.
func StartRefusableProxy(upstream string) (*Proxy, error) {
	// The port is found by binding and releasing it, so another process
	// can take it first; retry with a new one then.
	var err error
	for range 3 {
		var port int
		if port, err = FreePort(); err != nil {
			continue
		}
		var p *Proxy
		if p, err = startProxy(net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), upstream); err == nil {
			return p, nil
		}
	}
	return nil, err
}

func startProxy(listen, upstream string) (*Proxy, error) {
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	tp := toxiproxy.NewProxy(server, "link-"+upstream, listen, upstream)
	if err := tp.Start(); err != nil {
		return nil, fmt.Errorf("containerfaults: proxy to %s: %w", upstream, err)
	}
	return &Proxy{proxy: tp, addr: tp.Listen}, nil
}

// ProxyURL starts a proxy to the one server rawURL names (its host:port) and
// returns rawURL with the proxy's address in its place, for a client that
// dials what its URL says. The caller closes the proxy.
func ProxyURL(rawURL string) (string, *Proxy, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", nil, fmt.Errorf("containerfaults: proxy for %q: %w", rawURL, err)
	}
	proxied, p, err := proxyFor(u)
	if err != nil {
		return "", nil, err
	}
	return proxied.String(), p, nil
}

// proxyFor is [ProxyURL] for a parsed URL: it returns a copy of u with the
// proxy's address in place of the server's.
func proxyFor(u *url.URL) (*url.URL, *Proxy, error) {
	if u.Host == "" || strings.Contains(u.Host, ",") {
		return nil, nil, fmt.Errorf("containerfaults: proxy for %q: the URL must name exactly one server", u.Redacted())
	}
	p, err := StartProxy(u.Host)
	if err != nil {
		return nil, nil, err
	}
	proxied := *u
	proxied.Host = p.Addr()
	return &proxied, p, nil
}

// Addr is the address (host:port) clients dial to reach the server through
// the proxy.
func (p *Proxy) Addr() string { return p.addr }

// Cut silences the link in both directions, as described at [Proxy]. Cutting
// a cut link does nothing.
func (p *Proxy) Cut(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("containerfaults: Cut of a closed proxy")
	}
	if p.cut {
		return nil
	}
	for _, name := range cutToxics {
		stream := strings.TrimPrefix(name, "cut-")
		spec := fmt.Sprintf(`{"name":%q,"type":"latency","stream":%q,"attributes":{"latency":%d}}`, name, stream, partitionMillis)
		if _, err := p.proxy.Toxics.AddToxicJson(strings.NewReader(spec)); err != nil {
			p.restoreLocked()
			return fmt.Errorf("containerfaults: cut %s: %w", name, err)
		}
	}
	p.cut = true
	return nil
}

// Restore delivers what the cut held and lets everything through again.
// Restoring a link that is not cut does nothing.
func (p *Proxy) Restore(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.restoreLocked()
	return nil
}

// restoreLocked removes every toxic, including the one of two a failed Cut
// may have added.
func (p *Proxy) restoreLocked() {
	if p.closed {
		return
	}
	p.proxy.Toxics.ResetToxics(context.Background())
	p.cut = false
}

// Refuse closes every connection through the proxy and stops listening:
// from then on, until [Proxy.Reopen], a dial of Addr is refused, as it is
// by the host of a server that is down (a cut, by contrast, keeps
// connections open and silent). A cut stays in place, and holds the
// connections made after Reopen. Refusing a refused proxy does nothing.
// Make a proxy that will be refused with [StartRefusableProxy].
func (p *Proxy) Refuse() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("containerfaults: Refuse of a closed proxy")
	}
	if p.refused {
		return nil
	}
	p.proxy.Stop()
	p.refused = true
	return nil
}

// Reopen listens on Addr again after [Proxy.Refuse]; reopening a proxy that
// was not refused does nothing. The proxy's goroutines (its listener's,
// and those of the connections it accepts) do not carry the caller's
// profiler labels: they belong to the proxy, which outlives a caller such
// as a conformance case, whose leak check goes by label.
func (p *Proxy) Reopen() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("containerfaults: Reopen of a closed proxy")
	}
	if !p.refused {
		return nil
	}
	done := make(chan error, 1)
	go func() {
		pprof.SetGoroutineLabels(context.Background())
		done <- p.proxy.Start()
	}()
	if err := <-done; err != nil {
		return fmt.Errorf("containerfaults: reopen the proxy on %s: %w", p.addr, err)
	}
	p.refused = false
	return nil
}

// Close restores the link, then closes the proxy and every connection
// through it. It may be called more than once.
func (p *Proxy) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	// The toxics go first: a held byte would keep its link's goroutines
	// waiting after the connections close.
	p.restoreLocked()
	p.closed = true
	p.proxy.Stop()
	return nil
}

// Link is one client's link to any number of servers (a Redis Cluster's
// nodes, RedLock's masters): the client dials through [Link.DialContext],
// which makes a [Proxy] per server address on first use, and Cut and Restore
// act on all of them, including those made while the link is cut. It
// implements conformance.Link.
type Link struct {
	mu      sync.Mutex
	cut     bool
	closed  bool
	proxies map[string]*Proxy
}

// NewLink returns a link with no proxy yet. It is closed when tb's test
// ends, if [Link.Close] was not called before.
func NewLink(tb testing.TB) *Link {
	l := &Link{proxies: map[string]*Proxy{}}
	tb.Cleanup(func() { _ = l.Close() })
	return l
}

// DialContext connects to addr through the link's proxy for addr, with the
// signature of net.Dialer's, which client libraries take as a dial hook.
func (l *Link) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	p, err := l.proxy(ctx, addr)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	return d.DialContext(ctx, network, p.Addr())
}

func (l *Link) proxy(ctx context.Context, addr string) (*Proxy, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, errors.New("containerfaults: dial through a closed link")
	}
	if p := l.proxies[addr]; p != nil {
		return p, nil
	}
	p, err := StartProxy(addr)
	if err != nil {
		return nil, err
	}
	if l.cut {
		if err := p.Cut(ctx); err != nil {
			_ = p.Close()
			return nil, err
		}
	}
	l.proxies[addr] = p
	return p, nil
}

// Cut cuts every proxy of the link, and those it makes from now on, as
// [Proxy.Cut] does.
func (l *Link) Cut(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = true
	for _, p := range l.proxies {
		if err := p.Cut(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Restore restores every proxy of the link.
func (l *Link) Restore(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = false
	var errs []error
	for _, p := range l.proxies {
		errs = append(errs, p.Restore(ctx))
	}
	return errors.Join(errs...)
}

// Close closes every proxy of the link. It may be called more than once.
func (l *Link) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	var errs []error
	for _, p := range l.proxies {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}
