package dlock

// Offered reports whether a waiter of c for key offers itself for a direct
// handoff (handoff.go): tests wait for it instead of guessing with sleeps.
func Offered(c *Client, key string) bool {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	for _, q := range c.queues[key] {
		if q.cand != nil && q.cand.state == offered {
			return true
		}
	}
	return false
}
