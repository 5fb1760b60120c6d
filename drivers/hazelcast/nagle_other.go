//go:build !linux

package hazelcast

// noDelayTo does nothing where the process's sockets cannot be listed: see
// nagle.go.
func noDelayTo(map[int]bool) int { return 0 }
