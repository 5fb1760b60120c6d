package testserver

import (
	"context"
	"errors"
	"fmt"
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
type Proxy struct {
	proxy *toxiproxy.Proxy

	mu     sync.Mutex
	cut    bool
	closed bool
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
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	tp := toxiproxy.NewProxy(server, "link-"+upstream, "127.0.0.1:0", upstream)
	if err := tp.Start(); err != nil {
		tb.Fatalf("testserver: proxy to %s: %v", upstream, err)
	}
	p := &Proxy{proxy: tp}
	tb.Cleanup(func() { _ = p.Close() })
	return p
}

// Addr is the address (host:port) clients dial to reach the server through
// the proxy.
func (p *Proxy) Addr() string { return p.proxy.Listen }

// Cut silences the link in both directions, as described at [Proxy]. Cutting
// a cut link does nothing.
func (p *Proxy) Cut(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("testserver: Cut of a closed proxy")
	}
	if p.cut {
		return nil
	}
	for _, name := range cutToxics {
		stream := strings.TrimPrefix(name, "cut-")
		spec := fmt.Sprintf(`{"name":%q,"type":"latency","stream":%q,"attributes":{"latency":%d}}`, name, stream, partitionMillis)
		if _, err := p.proxy.Toxics.AddToxicJson(strings.NewReader(spec)); err != nil {
			p.restoreLocked()
			return fmt.Errorf("testserver: cut %s: %w", name, err)
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

// Proxies is one client's link made of several proxies (a client of several
// servers, such as RedLock's masters): Cut and Restore act on all of them.
type Proxies []*Proxy

// Cut cuts every proxy, the first error ending the loop.
func (ps Proxies) Cut(ctx context.Context) error {
	for _, p := range ps {
		if err := p.Cut(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Restore restores every proxy.
func (ps Proxies) Restore(ctx context.Context) error {
	var errs []error
	for _, p := range ps {
		errs = append(errs, p.Restore(ctx))
	}
	return errors.Join(errs...)
}

// Close closes every proxy.
func (ps Proxies) Close() error {
	var errs []error
	for _, p := range ps {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}
