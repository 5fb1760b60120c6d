package containerfaults

import (
	"context"
	"net"
	"net/url"
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
// address serves: each call starts a [Proxy] to the server u names (its
// host:port) and opens a driver with open from a copy of u with the proxy's
// address in its place, so that every connection of that driver goes
// through the link the suite cuts. open has the signature of dlock.OpenFunc,
// which a driver registers for its URL schemes. The proxy is closed when
// open fails.
func LinkedURL(u *url.URL, open func(ctx context.Context, u *url.URL) (driver.Driver, error)) func(context.Context) (driver.Driver, conformance.Link, error) {
	return func(ctx context.Context) (driver.Driver, conformance.Link, error) {
		proxied, link, err := proxyFor(u)
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
