package conformance

import (
	"fmt"
	"runtime"
	"sync"
)

// guard is the resource a lock protects, as a careful application would build
// it: it accepts a write only with a fencing token at least as high as any it
// has seen, and it records every overlap of critical sections. Readers may
// overlap each other; a writer overlaps nobody.
type guard struct {
	mu         sync.Mutex
	writers    int
	readers    int
	maxToken   uint64 // of every section so far
	maxWrite   uint64 // of writers only: concurrent readers enter in any order
	value      int
	violations []string
}

// enter starts a critical section; it returns false when the section must not
// write (its token is stale).
func (g *guard) enter(token uint64, shared bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case shared && g.writers > 0:
		g.violate("a reader entered while a writer was inside")
	case !shared && (g.writers > 0 || g.readers > 0):
		g.violate(fmt.Sprintf("a writer entered while %d writer(s) and %d reader(s) were inside", g.writers, g.readers))
	}
	if shared {
		g.readers++
	} else {
		g.writers++
	}
	if token == 0 {
		return true // the driver issues no tokens
	}
	limit := g.maxToken
	if shared {
		limit = g.maxWrite
	}
	if token <= limit {
		g.violate(fmt.Sprintf("stale fencing token %d presented after %d", token, limit))
		return false
	}
	g.maxToken = max(g.maxToken, token)
	if !shared {
		g.maxWrite = token
	}
	return true
}

// write increments the protected value in two steps, so that a concurrent
// writer loses an increment.
func (g *guard) write() {
	g.mu.Lock()
	v := g.value
	g.mu.Unlock()
	runtime.Gosched() // let an overlapping writer interleave, if there is one
	g.mu.Lock()
	g.value = v + 1
	g.mu.Unlock()
}

func (g *guard) leave(shared bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if shared {
		g.readers--
	} else {
		g.writers--
	}
}

func (g *guard) violate(what string) {
	if len(g.violations) < 10 {
		g.violations = append(g.violations, what)
	}
}

func (g *guard) report() ([]string, int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.violations...), g.value
}
