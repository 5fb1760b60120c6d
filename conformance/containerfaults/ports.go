package containerfaults

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"sync"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/testcontainers/testcontainers-go"
)

// FreePort returns a port of 127.0.0.1 that nothing listens on, below
// Linux's ephemeral range (32768-60999), so that no outgoing connection can
// take it while the container that publishes it is stopped between a
// restart's stop and start. It is found free by binding and releasing it, so
// another process may still take it first: when the container then fails to
// start with the port in use, retry with a new one. Within this process it
// never returns a port twice: two servers started at once would otherwise
// both find the same port free, and on the host's network the loser's
// readiness check would be answered by the winner.
func FreePort() (int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	var lastErr error
	for range 50 {
		port := 20000 + rand.IntN(12000)
		if handedOut.ports[port] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			lastErr = err
			continue
		}
		_ = l.Close()
		handedOut.ports[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("containerfaults: find a free port: %w", lastErr)
}

// handedOut are the ports FreePort has returned in this process.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: make(map[int]bool)}

// PublishOn publishes the container's port containerPort (such as
// "6379/tcp", which it also exposes) on hostPort of 127.0.0.1, for every
// start of the container: without a fixed binding Docker picks a random host
// port, and a new one after each restart, so clients could not reconnect.
func PublishOn(containerPort string, hostPort int) testcontainers.CustomizeRequestOption {
	return func(req *testcontainers.GenericContainerRequest) error {
		port, err := network.ParsePort(containerPort)
		if err != nil {
			return fmt.Errorf("containerfaults: bad container port %q: %w", containerPort, err)
		}
		if err := testcontainers.WithExposedPorts(containerPort)(req); err != nil {
			return err
		}
		// testcontainers keeps the bindings given here for exposed ports.
		return testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.PortBindings = network.PortMap{port: {{
				HostIP:   netip.MustParseAddr("127.0.0.1"),
				HostPort: strconv.Itoa(hostPort),
			}}}
		})(req)
	}
}
