package dlock_test

import (
	"testing"

	"go.uber.org/goleak"
)

// No test of the core may leave a goroutine behind: renewal and release run
// on timers and tracked goroutines that Close waits for.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
