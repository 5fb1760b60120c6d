package conformance

import (
	"time"
)

func testBackendPaused(t *T, e *env) {
	f := e.h.Faults
	if f == nil || f.Pause == nil || f.Resume == nil {
		t.Skipf("the harness has no Pause and Resume hooks")
	}
	key := e.key("paused")
	ma := e.mutex(t, e.client(t), key)
	mb, mc := e.mutex(t, e.client(t), key), e.mutex(t, e.client(t), key)
	la := lock(t, ma)

	// A short pause changes nothing.
	resume := pause(t, f)
	time.Sleep(e.ttl * 3 / 10) // the length of the fault
	resume()
	if err := la.Extend(t.Context()); err != nil {
		t.Fatalf("Extend after a pause of 0.3 TTL: %v", err)
	}

	// A long one loses the lock, by the deadline.
	deadline := la.Deadline()
	resume = pause(t, f)
	paused := time.Now()
	within(t, la.Done(), time.Until(deadline)+e.slack, "the lost signal while the backend is paused")
	time.Sleep(time.Until(paused.Add(2 * e.ttl))) // the length of the fault
	resume()

	lb := lockWithin(t, mb, 2*e.ttl+e.slack, "Lock after the pause")
	expectLocked(t, mc, "one client holds the lock after the pause", lb)
	unlock(t, lb)
}

func testBackendRestarted(t *T, e *env) {
	f := e.h.Faults
	if f == nil || f.Restart == nil {
		t.Skipf("the harness has no Restart hook")
	}
	key := e.key("restart")
	ma, mb := e.mutex(t, e.client(t), key), e.mutex(t, e.client(t), key)
	la := lock(t, ma)
	before := la.Token()
	if err := f.Restart(t.Context()); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	// The holder either keeps the lock (the backend kept it) or is told
	// within a TTL that it lost it.
	select {
	case <-la.Done():
	case <-time.After(e.ttl + e.slack):
		if err := la.Extend(t.Context()); err == nil {
			unlock(t, la)
		}
	}
	lb := lockWithin(t, mb, 2*e.ttl+e.slack, "Lock after the restart")
	if after := lb.Token(); before != 0 && after <= before {
		t.Errorf("fencing token after the restart: got %d, want more than %d", after, before)
	}
	unlock(t, lb)
}

// pause pauses the backend with f's hooks and returns what resumes it: a
// function that may be called more than once and resumes once, and that the
// test's cleanup calls too, so that a test that fails while the backend is
// paused leaves it running.
func pause(t *T, f *Faults) (resume func()) {
	resumed := false
	resume = func() {
		if !resumed {
			resumed = true
			if err := f.Resume(t.Context()); err != nil {
				t.Fatalf("Resume: %v", err)
			}
		}
	}
	t.Cleanup(resume)
	if err := f.Pause(t.Context()); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	return resume
}
