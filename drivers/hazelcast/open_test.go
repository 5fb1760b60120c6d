package hazelcast

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dlock-go/dlock"
)

// Open of a URL where no member listens fails when its context ends, with
// exactly the context's error, instead of retrying forever. Port 1 on
// loopback refuses connections; nothing leaves the machine.
//
// hazelcast-go-client v1.6.0 leaves one goroutine behind (schemaInvoker)
// when a client fails to start, and hands back nothing to shut down: a leak
// of the library, one goroutine per failed Open, that the check below
// tolerates by name and nothing else.
func TestOpenWithoutAMember(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		goleak.VerifyNone(t, opt, goleak.IgnoreTopFunction("github.com/hazelcast/hazelcast-go-client.(*Client).schemaInvoker"))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	c, err := dlock.Open(ctx, "hazelcast://127.0.0.1:1/dev?log_level=off")
	if err == nil {
		_ = c.Close(context.Background())
		t.Fatal("Open with no member listening succeeded")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Open with no member listening: %v, want the context's deadline", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Open took %v to give up after its 2s deadline", took)
	}
}
