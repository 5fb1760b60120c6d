package hazelcast

import (
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hazelcast/hazelcast-go-client/cluster"
)

// Nagle's algorithm on the connections of a client the Driver owns.
//
// hazelcast-go-client v1.6.0 turns Nagle's algorithm on for every connection
// it opens (Go's own default is off). A request for a lock that is held
// waits in the member's queue with no answer, so the member acknowledges
// it only when its delayed-acknowledgement timer fires (40 ms on Linux), and
// meanwhile Nagle's algorithm holds back whatever else the client writes on
// that connection. Measured on one member: a raw tryLock waiting for a lock
// that the same client unlocked within 40 ms was granted 40–43 ms after the
// unlock (1 ms with Nagle's algorithm off), and a handoff between two Locks
// of one dlock Client took 43.7 ms at the median. A Driver made from a URL
// owns its client, so it turns the algorithm off on the client's
// connections: the process's TCP sockets that have it on and whose remote
// port is a member's (the URL's, and those of the members the client
// learns of). It looks when it has connected, and before a wait in a
// member's queue at most once a second, so that connections the client
// opens later (to other members, or after a reconnection) are found too.
// Go turns the algorithm off on every connection it makes, so a socket of
// this process that has it on was set so on purpose; among those, only
// sockets to a member's port are touched, which includes the connections
// of other Hazelcast clients of this process to the same members. A Driver
// over a caller's client (New) does not look. Where the process's sockets cannot be listed (anything
// but Linux), nothing changes but the latency.
type nagle struct {
	mu    sync.Mutex
	ports map[int]bool // remote ports of the members
	last  time.Time    // of the latest look, for the once-a-second bound
}

// nagleEvery bounds how often waits look for new connections.
const nagleEvery = time.Second

// newNagle returns a nagle for the members at addrs ("host:port").
func newNagle(addrs []string) *nagle {
	n := &nagle{ports: map[int]bool{}}
	for _, a := range addrs {
		n.addAddress(a)
	}
	return n
}

// addAddress records the port of a member's address.
func (n *nagle) addAddress(addr string) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return
	}
	port, err := strconv.Atoi(p)
	if err != nil || port <= 0 {
		return
	}
	n.mu.Lock()
	n.ports[port] = true
	n.mu.Unlock()
}

// onMember records the ports of a member the client learned of: its
// address and every address it publishes for an endpoint.
func (n *nagle) onMember(e cluster.MembershipStateChanged) {
	if e.State != cluster.MembershipStateAdded {
		return
	}
	n.addAddress(string(e.Member.Address))
	for _, a := range e.Member.AddressMap {
		n.addAddress(string(a))
	}
}

// now turns the algorithm off on the client's connections at once, and
// returns how many sockets it changed.
func (n *nagle) now() int {
	n.mu.Lock()
	n.last = time.Now()
	ports := make(map[int]bool, len(n.ports))
	for p := range n.ports {
		ports[p] = true
	}
	n.mu.Unlock()
	return noDelayTo(ports)
}

// beforeWait is now, at most once per nagleEvery; nil does nothing.
func (n *nagle) beforeWait() {
	if n == nil {
		return
	}
	n.mu.Lock()
	due := time.Since(n.last) >= nagleEvery
	n.mu.Unlock()
	if due {
		n.now()
	}
}
