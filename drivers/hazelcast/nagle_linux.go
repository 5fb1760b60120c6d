package hazelcast

import (
	"os"
	"strconv"
	"syscall"
)

// noDelayTo turns Nagle's algorithm off on this process's TCP sockets that
// have it on and whose remote port is in ports, and returns how many it
// changed. A descriptor closed and reused meanwhile is at worst another
// such socket, whose only change is latency.
func noDelayTo(ports map[int]bool) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	changed := 0
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		peer, err := syscall.Getpeername(fd)
		if err != nil {
			continue // not a connected socket
		}
		var port int
		switch sa := peer.(type) {
		case *syscall.SockaddrInet4:
			port = sa.Port
		case *syscall.SockaddrInet6:
			port = sa.Port
		default:
			continue
		}
		if !ports[port] {
			continue
		}
		on, err := syscall.GetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY)
		if err != nil || on != 0 {
			continue // not TCP, or already off
		}
		if syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1) == nil {
			changed++
		}
	}
	return changed
}
