package zookeeper

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/conformance"
	"github.com/dlock-go/dlock/conformance/containerfaults"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

// conformanceSession is the session timeout, and so the TTL, of the suite's
// Drivers: longer than testSession, because go-zookeeper drops a connection
// that hears nothing for two thirds of it, and a contender's request then
// fails with "connection closed" (a 2 s session lost its connection that
// way once, in a run with two busy processes and three container suites
// beside it on 2 cores).
const conformanceSession = 3 * time.Second

// TestConformance runs the shared suite against the real server, with its
// fault hooks when the server is this package's container. The suite's TTL
// is the session timeout: the shortest TTL the Driver accepts.
func TestConformance(t *testing.T) {
	base := "/conformance-" + rand.Text()[:8]
	u := testkit.URL(t, testkit.WithQuery(t, testURL(t, base), sessionTTLParam, conformanceSession.String()))
	conn := rawConn(t)
	h := conformance.Harness{
		NewDriver: func(ctx context.Context) (driver.Driver, error) {
			return open(ctx, u)
		},
		TTL: conformanceSession,
		// Tampering is what an operator with zkCli would do: delete the
		// holder's node, or replace it by a stranger's at the head of the
		// queue.
		Tamper: func(ctx context.Context, key string, overwrite bool) error {
			return tamper(conn, "/dlock-test"+base, key, overwrite)
		},
		// A client whose link to the server the partition cases cut: its
		// session's heartbeats stop with everything else.
		NewLinkedDriver: containerfaults.LinkedURL(u, open),
		Faults:          server.FaultHooks(),
		// The recipe: each waiter watches its predecessor sequence node.
		ClientsServedInOrder: true,
	}
	conformance.Run(t, h)
}

// tamper deletes every queue node of key under base and, when overwrite is
// set, creates a stranger's writer node in their place, which holds the lock
// (it is alone in the queue) for as long as conn's session lives.
func tamper(conn *zk.Conn, base, key string, overwrite bool) error {
	dir := base + "/" + escapeKey(key)
	children, _, err := conn.Children(dir)
	if err != nil {
		return err
	}
	for _, name := range children {
		if err := conn.Delete(dir+"/"+name, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		}
	}
	if !overwrite {
		return nil
	}
	for tries := 0; ; tries++ {
		_, err := conn.Create(dir+"/"+queuePrefix(kindWriter, "stranger", ""), nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
		if !errors.Is(err, zk.ErrNoNode) || tries > 0 {
			return err
		}
		// The directory is a container node, and the server's periodic
		// sweep may have removed it once the deletions above left it
		// empty: make it again, as the driver would, and create once more.
		if _, err := conn.CreateContainer(dir, nil, zk.FlagContainer, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
}
