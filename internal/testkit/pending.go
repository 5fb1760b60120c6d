package testkit

import (
	"testing"
	"time"
)

// Pending is a call running in a goroutine of its own, such as a Lock that
// waits for the holder to let go: a test starts it with [Go], acts, and
// collects its outcome with [Pending.Within].
type Pending[T any] struct {
	done chan outcome[T]
}

type outcome[T any] struct {
	v   T
	err error
}

// Go starts f in a goroutine of its own.
func Go[T any](f func() (T, error)) *Pending[T] {
	p := &Pending[T]{done: make(chan outcome[T], 1)}
	go func() {
		v, err := f()
		p.done <- outcome[T]{v, err}
	}()
	return p
}

// Within returns the call's result, waiting at most d for it, and fails tb,
// naming the call what, when the call fails or has not returned by then.
func (p *Pending[T]) Within(tb testing.TB, d time.Duration, what string) T {
	tb.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case o := <-p.done:
		if o.err != nil {
			tb.Fatalf("%s: %v", what, o.err)
		}
		return o.v
	case <-timer.C:
		tb.Fatalf("%s: no answer within %v", what, d)
		panic("unreachable") // Fatalf does not return
	}
}
