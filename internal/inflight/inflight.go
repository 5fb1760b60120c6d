// Package inflight counts a driver's work that its Close must wait for
// (background goroutines, operations left running when their caller gave
// up), and refuses new work once Close has begun, so that nothing starts
// after Close has waited.
package inflight

import "sync"

// Group is the work in flight of one driver. Its zero value is open and
// empty; it is safe for concurrent use.
type Group struct {
	mu     sync.Mutex // guards closed against Add racing with Wait
	closed bool
	wg     sync.WaitGroup
}

// Enter counts one piece of work in until done is called; ok is false,
// and nothing counted, once Close has begun.
func (g *Group) Enter() (done func(), ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, false
	}
	g.wg.Add(1)
	return g.wg.Done, true
}

// Go runs f in a goroutine counted in the group; false, without running
// it, once Close has begun.
func (g *Group) Go(f func()) bool {
	done, ok := g.Enter()
	if !ok {
		return false
	}
	go func() {
		defer done()
		f()
	}()
	return true
}

// Close refuses new work, calls stop (if not nil) to make the work in
// flight end, and waits until it has. It reports whether this call closed
// the group: a later call does nothing and returns false.
func (g *Group) Close(stop func()) bool {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return false
	}
	g.closed = true
	g.mu.Unlock()
	if stop != nil {
		stop()
	}
	g.wg.Wait()
	return true
}
