package dlock_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/dlock-go/dlock"
)

// No test of the core may leave a goroutine behind (renewal and release run
// on timers and tracked goroutines that Close waits for), nor make a move
// the handoff's state machine does not allow.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
		if bugs := dlock.BrokenInvariants(); len(bugs) > 0 {
			fmt.Fprintf(os.Stderr, "the core broke its invariants: %q\n", bugs)
			code = 1
		}
	}
	os.Exit(code)
}
