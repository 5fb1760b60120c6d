package zookeeper

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/dlock-go/dlock/internal/testserver"
)

// TestNoLeakedGoroutines runs last (top-level tests run in file order, and
// none of this package's is parallel): by then every Driver the tests made is
// closed, and no goroutine of the Driver or of its client library may be
// left. testserver.Main owns TestMain, so goleak.VerifyTestMain cannot wrap
// it; the goroutines of testserver and of the Docker client are expected.
func TestNoLeakedGoroutines(t *testing.T) {
	goleak.VerifyNone(t, testserver.IgnoreOwnGoroutines()...)
}
