package containerfaults_test

import (
	"context"
	"net"
	"net/url"
	"strconv"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"
	"github.com/testcontainers/testcontainers-go"

	"github.com/dlock-go/dlock/conformance"
	"github.com/dlock-go/dlock/conformance/containerfaults"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/drivers/memcache"
)

// A driver's tests run the conformance suite with every fault hook against
// a backend in a container: pausing, resuming and restarting the container,
// and cutting one client's link to it. Here the driver is dlock's memcache
// driver and the backend a memcached container.
func Example() {
	// The body of the driver's TestConformance(t *testing.T), which go test
	// runs; the example itself runs nothing, as the test needs a Docker
	// engine and the image.
	testConformance := func(t *testing.T) {
		ctx := t.Context()

		// A fixed host port, so that the server comes back on the address its
		// clients know when the suite restarts the container.
		port, err := containerfaults.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		ctr, err := testcontainers.Run(ctx, "memcached:1.6-alpine", containerfaults.PublishOn("11211/tcp", port))
		testcontainers.CleanupContainer(t, ctr)
		if err != nil {
			t.Fatal(err)
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))

		// Ready once the server answers a request of its own protocol.
		faults, err := containerfaults.New(ctx, ctr, func(context.Context) error {
			mc := gomemcache.New(addr)
			defer mc.Close()
			return mc.Ping()
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = faults.Close(context.Background()) })
		if err := faults.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}

		// The driver is opened from a URL, as dlock.Open opens it, so that the
		// partition cases can open one through a proxy of its own by swapping
		// the address.
		open := func(_ context.Context, u *url.URL) (driver.Driver, error) {
			return memcache.New(gomemcache.New(u.Host))
		}
		u := &url.URL{Scheme: "memcache", Host: addr}
		conformance.Run(t, conformance.Harness{
			NewDriver: func(ctx context.Context) (driver.Driver, error) {
				return open(ctx, u)
			},
			TTL:             8 * time.Second, // memcached expires in whole seconds
			Faults:          faults.Faults(),
			NewLinkedDriver: containerfaults.LinkedURL(u, open),
		})
	}
	_ = testConformance
	// Output:
}
