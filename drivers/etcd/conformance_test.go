package etcd

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/dlock-go/dlock/conformance"
	"github.com/dlock-go/dlock/conformance/containerfaults"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// suiteTTL is the session TTL and the lock TTL of the conformance run. The
// exclusion cases run 32 contending goroutines, each Client with a session
// of its own: on a loaded machine running -race, a 1 s session (a keepalive
// every 333 ms, given up after 1 s) lost sessions to scheduler stalls.
const suiteTTL = 2 * time.Second

// TestConformance runs the shared suite against the real server, with its
// fault hooks when the server is this package's container, and checks that
// the drivers it made leave no goroutine behind.
func TestConformance(t *testing.T) {
	server.Need(t)
	before := goleak.IgnoreCurrent()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints(t), Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	h := conformance.Harness{
		NewDriver: func(ctx context.Context) (driver.Driver, error) {
			return openTest(ctx, suiteTTL)
		},
		TTL: suiteTTL,
		// Tampering is what an operator with etcdctl would do to the
		// holder's key: delete it, or put another value (and no lease) over
		// it, which keeps its create revision but not its mod revision.
		Tamper: func(ctx context.Context, key string, overwrite bool) error {
			n := namesOf(DefaultKeyPrefix, key)
			resp, err := cli.Get(ctx, n.queue, clientv3.WithFirstCreate()...)
			if err != nil {
				return err
			}
			if len(resp.Kvs) == 0 {
				return fmt.Errorf("no entry under %q", n.queue)
			}
			holder := string(resp.Kvs[0].Key)
			if overwrite {
				_, err = cli.Put(ctx, holder, "stranger")
			} else {
				_, err = cli.Delete(ctx, holder)
			}
			return err
		},
		// A client whose link to the server the partition cases cut: its
		// session lease's keep-alives stop with everything else.
		NewLinkedDriver: containerfaults.LinkedURL(testkit.URL(t, testURL(suiteTTL)), open),
		Faults:          server.FaultHooks(),
		// The recipe: each waiter watches its predecessor by create revision.
		ClientsServedInOrder: true,
	}
	conformance.Run(t, h)
	_ = cli.Close()
	goleak.VerifyNone(t, append(testserver.IgnoreOwnGoroutines(), before)...)
}
