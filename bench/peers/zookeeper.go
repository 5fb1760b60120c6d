package main

import (
	"context"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/internal/benchkit"
	"github.com/dlock-go/dlock/internal/benchtargets"
	"github.com/dlock-go/dlock/internal/testserver"
)

// zkSession is the session timeout of every ZooKeeper contender: the
// project's image caps sessions at 4 s (dlock's TTL may be one to two
// session timeouts: the 8 s TTL is two).
const zkSession = 4 * time.Second

// zookeeperBackend is one ZooKeeper server: dlock and go-zookeeper's Lock
// (the ZooKeeper lock recipe), each contender with a session of its own.
var zookeeperBackend = backend{name: "zookeeper", start: onServer(testserver.StartZooKeeper,
	func(_ context.Context, addr string) (benchkit.Target, func(), error) {
		return benchtargets.ZooKeeperTarget("zk://"+addr+"/dlock-peers?session_ttl="+zkSession.String(), zkSession)
	},
	func(addr string) []peer {
		return []peer{{name: "zk.Lock", newLocker: func(ctx context.Context, key string) (benchkit.Locker, func(), error) {
			conn, err := benchtargets.ZooKeeperSession([]string{addr}, zkSession)
			if err != nil {
				return nil, nil, err
			}
			l := zk.NewLock(conn, "/peers/"+key, zk.WorldACL(zk.PermAll))
			return benchkit.LockerFunc(func(ctx context.Context) (func(context.Context) error, error) {
				// zk.Lock takes no context: it waits until it holds
				// the lock. Got after ctx ended, it is given back.
				if err := l.Lock(); err != nil {
					return nil, err
				}
				if err := ctx.Err(); err != nil {
					_ = l.Unlock()
					return nil, err
				}
				return func(context.Context) error { return l.Unlock() }, nil
			}), conn.Close, nil
		}}}
	})}
