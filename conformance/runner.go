package conformance

import (
	"context"
	"crypto/rand"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// T is what a case reports to. It is the suite's own, not a *testing.T, so
// that the suite's self-tests can run cases against broken drivers and
// collect which ones failed without failing themselves.
type T struct {
	ctx context.Context

	mu       sync.Mutex
	failed   bool
	skipped  string
	logs     []string
	cleanups []func()
}

// Context returns the case's context: it ends at the watchdog's deadline.
func (t *T) Context() context.Context { return t.ctx }

func (t *T) record(failed bool, format string, args ...any) {
	_, file, line, _ := runtime.Caller(2)
	msg := fmt.Sprintf("%s:%d: %s", file[strings.LastIndexByte(file, '/')+1:], line, fmt.Sprintf(format, args...))
	t.mu.Lock()
	defer t.mu.Unlock()
	t.logs = append(t.logs, msg)
	t.failed = t.failed || failed
}

// Errorf records a failure and goes on.
func (t *T) Errorf(format string, args ...any) { t.record(true, format, args...) }

// Fatalf records a failure and ends the case. Like testing.T's, it must be
// called from the case's own goroutine.
func (t *T) Fatalf(format string, args ...any) {
	t.record(true, format, args...)
	runtime.Goexit()
}

// Logf records a message shown with the case's result.
func (t *T) Logf(format string, args ...any) { t.record(false, format, args...) }

// Skipf ends the case as skipped, with the reason.
func (t *T) Skipf(format string, args ...any) {
	t.mu.Lock()
	t.skipped = fmt.Sprintf(format, args...)
	t.mu.Unlock()
	runtime.Goexit()
}

// Cleanup registers f to run when the case ends, last registered first.
func (t *T) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

// Failed reports whether the case has failed so far.
func (t *T) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

// result is how one case ended.
type result struct {
	failed   bool
	skipped  string
	hung     bool
	logs     []string
	duration time.Duration
}

// report hands a result to the real test.
func (r result) report(t *testing.T, c testCase) {
	t.Helper()
	for _, l := range r.logs {
		t.Log(l)
	}
	switch {
	case r.failed:
		t.Errorf("rule broken: %s", c.rule)
	case r.skipped != "":
		t.Skip(r.skipped)
	}
}

// watchdogGrace is how long a case may overrun its context before the
// watchdog gives up on it.
const watchdogGrace = 15 * time.Second

// execute runs one case under the watchdog: the case's context ends at its
// time limit, and a case that still has not returned some time after that is
// reported as hung, with every goroutine's stack, instead of hanging the run.
func execute(env *env, c testCase) result {
	limit := c.limit(env.ttl)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	t := &T{ctx: ctx}
	done := make(chan struct{})
	start := time.Now()
	id := env.run + "/" + c.name + "/" + rand.Text()[:6]
	go runLabelled(id, func() {
		defer close(done)
		defer t.runCleanups()
		c.run(t, env)
	})
	select {
	case <-done:
	case <-time.After(limit + watchdogGrace):
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Errorf("watchdog: the case did not end within %v of its %v limit; goroutines:\n%s", watchdogGrace, limit, buf)
		t.mu.Lock()
		defer t.mu.Unlock()
		return result{failed: true, hung: true, logs: append([]string(nil), t.logs...), duration: time.Since(start)}
	}
	duration := time.Since(start)
	if stacks := leaked(id); len(stacks) > 0 {
		t.Errorf("goroutines the case started were still running %v after it ended:\n%s", leakWait, strings.Join(stacks, "\n\n"))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return result{failed: t.failed, skipped: t.skipped, logs: t.logs, duration: duration}
}

func (t *T) runCleanups() {
	for {
		t.mu.Lock()
		n := len(t.cleanups)
		if n == 0 {
			t.mu.Unlock()
			return
		}
		f := t.cleanups[n-1]
		t.cleanups = t.cleanups[:n-1]
		t.mu.Unlock()
		f()
	}
}
