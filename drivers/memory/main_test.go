package memory_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The whole conformance suite runs here: nothing it starts may outlive it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
