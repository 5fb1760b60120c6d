package dlock

import (
	"strings"
	"testing"
)

// The handoff's state machine, written out once more as its specification:
// every (state, event) pair either leads where this table says, or is
// refused, and step reports a refused one as a bug and changes nothing.
func TestHandoffTransitionTable(t *testing.T) {
	want := map[handoffState]map[handoffEvent]handoffState{
		unoffered: {evOffer: offered},
		offered:   {evClaim: claimed, evLeave: withdrawn},
		claimed:   {evDeliver: delivered, evLeave: abandoned},
		delivered: {evReceive: received, evLeave: givenBack},
		abandoned: {evDeliver: givenBack},
	}
	for from := range numHandoffStates {
		for ev := range numHandoffEvents {
			t.Run(from.String()+"/"+ev.String(), func(t *testing.T) {
				wantTo, wantOK := want[from][ev]
				to, ok := transition(from, ev)
				if ok != wantOK || (ok && to != wantTo) {
					t.Fatalf("transition(%v, %v) = %v, %v; want %v, %v", from, ev, to, ok, wantTo, wantOK)
				}
				before := len(BrokenInvariants())
				var observed int
				cand := &candidate{state: from, observe: func(handoffState, handoffEvent, handoffState) { observed++ }}
				stepped := cand.step(ev)
				bugs := forgetBrokenInvariants(before) // this test's own, expected
				switch {
				case stepped != wantOK:
					t.Errorf("step reported %v, want %v", stepped, wantOK)
				case wantOK && cand.state != wantTo:
					t.Errorf("step left the state at %v, want %v", cand.state, wantTo)
				case !wantOK && cand.state != from:
					t.Errorf("a refused step moved the state to %v", cand.state)
				case !wantOK && (len(bugs) != 1 || !strings.Contains(bugs[0], ev.String())):
					t.Errorf("a refused step reported %q, want one bug naming %v", bugs, ev)
				case wantOK && len(bugs) != 0:
					t.Errorf("an allowed step reported %q", bugs)
				case observed != map[bool]int{true: 1, false: 0}[wantOK]:
					t.Errorf("the observer saw %d steps", observed)
				}
			})
		}
	}
	// Out-of-range values are refused too, and named.
	if _, ok := transition(numHandoffStates, evOffer); ok {
		t.Error("a state out of range was allowed to move")
	}
	if _, ok := transition(offered, numHandoffEvents); ok {
		t.Error("an event out of range was allowed")
	}
	if s := handoffState(200).String(); s != "handoffState(200)" {
		t.Errorf("String of an unknown state: %q", s)
	}
	if s := handoffEvent(200).String(); s != "handoffEvent(200)" {
		t.Errorf("String of an unknown event: %q", s)
	}
}

// Final states are final, and every state but unoffered is reached by
// exactly the transitions the doc lists (no state is left unreachable).
func TestHandoffStatesReachable(t *testing.T) {
	reached := map[handoffState]bool{unoffered: true}
	for from := range numHandoffStates {
		for ev := range numHandoffEvents {
			if to, ok := transition(from, ev); ok {
				reached[to] = true
			}
		}
	}
	for s := range numHandoffStates {
		if !reached[s] {
			t.Errorf("state %v is never reached", s)
		}
	}
	for _, final := range []handoffState{withdrawn, received, givenBack} {
		for ev := range numHandoffEvents {
			if to, ok := transition(final, ev); ok {
				t.Errorf("final state %v moves by %v to %v", final, ev, to)
			}
		}
	}
}
