package redis

import "github.com/redis/go-redis/v9/maintnotifications"

// maintOff is the go-redis maintenance-notifications setting of the clients
// the driver makes from URLs: off. go-redis turns the feature on by default
// ("auto", for Redis Enterprise and Cloud endpoints that announce moves);
// each client (every node client of a ClusterClient too) then runs handoff
// machinery of its own, with a circuit-breaker cleanup goroutine that
// outlived the Driver in the leak check after a paused backend. dlock needs
// none of it: a server that moves or restarts drops its connections, and a
// dropped connection is a transient error that a waiting Lock rides out,
// while a connection handed over beneath an in-flight script would make one
// more ambiguous outcome. Callers who pass their own client to [New] or
// [NewRedLock] choose for themselves.
func maintOff() *maintnotifications.Config {
	return &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
}
