package conformance

// testLateNotifications runs the contest with every wake-up held back by up
// to a quarter of the TTL, some delivered twice, so that they arrive out of
// step with the lock: after it was taken again, long after the release they
// tell of. Wake-ups are hints, so nothing changes but latency; and a waiter
// whose wake-up is late still gets a free lock, by polling.
func testLateNotifications(t *T, e *env) {
	if e.caps.Notifier == nil {
		t.Skipf("the driver sends no wake-ups (no Notifier)")
	}
	noisy := withFault(noisyWakeups{lag: e.ttl / 4})
	key := contestWithDeadlines(t, e, "late-wakeups", contest{wrap: noisy, longestLock: 2 * e.ttl})

	// A waiter still gets the lock soon after its release.
	holder, waiter := e.mutex(t, e.client(t), key), e.mutex(t, e.client(t, noisy), key)
	lh := lock(t, holder)
	got := make(chan struct{})
	go func() {
		defer close(got)
		if l, err := waiter.Lock(t.Context()); err == nil {
			unlock(t, l)
		}
	}()
	unlock(t, lh)
	within(t, got, e.ttl/4+e.slack, "a waiter's Lock after the release, its wake-up late")
}
