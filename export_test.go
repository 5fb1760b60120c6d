package dlock

import (
	"fmt"
	"sync"
)

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

// HandoffStep is one transition of a handoff's state machine, by name.
type HandoffStep struct{ From, Event, To string }

func (s HandoffStep) String() string { return fmt.Sprintf("%s --%s--> %s", s.From, s.Event, s.To) }

// HandoffTransitions lists every transition the state machine allows.
func HandoffTransitions() []HandoffStep {
	var all []HandoffStep
	for from := range numHandoffStates {
		for ev := range numHandoffEvents {
			if to, ok := transition(from, ev); ok {
				all = append(all, HandoffStep{from.String(), ev.String(), to.String()})
			}
		}
	}
	return all
}

// ObserveHandoffs records the transitions of c's handoffs; call it before
// any Lock on c. The function returned reports those made so far.
func ObserveHandoffs(c *Client) func() []HandoffStep {
	var mu sync.Mutex
	var seen []HandoffStep
	c.observeHandoff = func(from handoffState, ev handoffEvent, to handoffState) {
		mu.Lock()
		seen = append(seen, HandoffStep{from.String(), ev.String(), to.String()})
		mu.Unlock()
	}
	return func() []HandoffStep {
		mu.Lock()
		defer mu.Unlock()
		return append([]HandoffStep(nil), seen...)
	}
}

// brokenInvariants are the bugs of the core reported during the run
// (invariantBroken): TestMain fails the run when there are any.
var (
	brokenMu         sync.Mutex
	brokenInvariants []string
)

func init() {
	invariantBroken = func(what string) {
		brokenMu.Lock()
		brokenInvariants = append(brokenInvariants, what)
		brokenMu.Unlock()
	}
}

// BrokenInvariants returns the bugs of the core reported so far.
func BrokenInvariants() []string {
	brokenMu.Lock()
	defer brokenMu.Unlock()
	return append([]string(nil), brokenInvariants...)
}

// forgetBrokenInvariants drops the bugs reported after the first n, which a
// test caused on purpose, and returns them.
func forgetBrokenInvariants(n int) []string {
	brokenMu.Lock()
	defer brokenMu.Unlock()
	dropped := append([]string(nil), brokenInvariants[n:]...)
	brokenInvariants = brokenInvariants[:n]
	return dropped
}
