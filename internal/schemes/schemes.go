// Package schemes is the registry of URL schemes that dlock.Open and the
// doctor share: each maps a lower-cased scheme to what a driver package
// registered for it from init.
package schemes

import (
	"slices"
	"strings"
	"sync"
)

// Registry maps URL schemes to values of type F (an open or check
// function). The zero Registry is not usable; make one with [New].
type Registry[F any] struct {
	owner string // the package whose Register panics, for its messages
	mu    sync.RWMutex
	byKey map[string]F
}

// New returns an empty Registry whose panics name owner ("dlock").
func New[F any](owner string) *Registry[F] {
	return &Registry[F]{owner: owner, byKey: map[string]F{}}
}

// Register adds f under scheme, case-insensitively. It panics when the
// scheme is taken, as two packages claiming one scheme is a programming
// error.
func (r *Registry[F]) Register(scheme string, f F) {
	scheme = strings.ToLower(scheme)
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.byKey[scheme]; dup {
		panic(r.owner + ": Register called twice for scheme " + scheme)
	}
	r.byKey[scheme] = f
}

// Lookup returns what scheme (already lower-case) was registered with.
func (r *Registry[F]) Lookup(scheme string) (F, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	f, ok := r.byKey[scheme]
	return f, ok
}

// Schemes returns the registered schemes, sorted.
func (r *Registry[F]) Schemes() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	s := make([]string, 0, len(r.byKey))
	for k := range r.byKey {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}
