package containerfaults

import (
	"context"
	"net"
	"testing"

	"github.com/dlock-go/dlock/conformance"
	"github.com/dlock-go/dlock/driver"
)

// Assertions that the links are what the suite cuts.
var (
	_ conformance.Link = (*Proxy)(nil)
	_ conformance.Link = (*Link)(nil)
)

// LinkedURL returns a Harness.NewLinkedDriver for a backend that one server
// address serves: each call starts a [Proxy] to the server rawURL names
// ([ProxyURL]) and opens a driver with open from rawURL with the proxy's
// address in its place, so that every connection of that driver goes
// through the link the suite cuts. The proxy is closed when open fails.
func LinkedURL(rawURL string, open func(ctx context.Context, rawURL string) (driver.Driver, error)) func(context.Context) (driver.Driver, conformance.Link, error) {
	return func(ctx context.Context) (driver.Driver, conformance.Link, error) {
		proxied, link, err := ProxyURL(rawURL)
		if err != nil {
			return nil, nil, err
		}
		d, err := open(ctx, proxied)
		if err != nil {
			_ = link.Close()
			return nil, nil, err
		}
		return d, link, nil
	}
}

// DialFunc is a dial hook with the signature of net.Dialer's DialContext,
// which client libraries take to make their connections.
type DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// LinkedDial returns a Harness.NewLinkedDriver for a driver whose client
// dials several servers (a cluster's nodes, a quorum's members) or learns
// their addresses from the backend: each call makes a new [Link] and opens a
// driver with open, which must make every connection through dial. The link
// is closed when open fails, and when tb's test ends.
func LinkedDial(tb testing.TB, open func(ctx context.Context, dial DialFunc) (driver.Driver, error)) func(context.Context) (driver.Driver, conformance.Link, error) {
	return func(ctx context.Context) (driver.Driver, conformance.Link, error) {
		link := NewLink(tb)
		d, err := open(ctx, link.DialContext)
		if err != nil {
			_ = link.Close()
			return nil, nil, err
		}
		return d, link, nil
	}
}
