package zookeeper

import (
	"testing"

	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// Open of a URL where nothing listens, or where a server accepts
// connections and never answers, fails within its connect timeout.
func TestOpenFailsFast(t *testing.T) {
	testkit.OpenFailsFast(t, func(addr string) string { return "zk://" + addr + "/x" }, testserver.IgnoreOwnGoroutines()...)
}
