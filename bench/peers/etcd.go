package main

import (
	"context"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/dlock-go/dlock/internal/benchkit"
	"github.com/dlock-go/dlock/internal/benchtargets"
	"github.com/dlock-go/dlock/internal/testserver"
)

// etcdBackend is one etcd member: dlock and etcd's own concurrency.Mutex,
// each contender with a client and a session (lease) of its own, of the
// TTL.
var etcdBackend = backend{name: "etcd", start: onServer(testserver.StartEtcd,
	func(_ context.Context, addr string) (benchkit.Target, func(), error) {
		// dlock's Mutex TTL may not exceed the session TTL.
		return benchtargets.Etcd("etcd://" + addr + "/dlock-peers?session_ttl=" + ttl.String())
	},
	func(addr string) []peer {
		endpoints := strings.Split(addr, ",")
		return []peer{{name: "concurrency.Mutex", newLocker: func(ctx context.Context, key string) (benchkit.Locker, func(), error) {
			cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 10 * time.Second, Context: context.WithoutCancel(ctx), Logger: zap.NewNop()})
			if err != nil {
				return nil, nil, err
			}
			s, err := concurrency.NewSession(cli, concurrency.WithTTL(int(ttl/time.Second)))
			if err != nil {
				_ = cli.Close()
				return nil, nil, err
			}
			m := concurrency.NewMutex(s, "/peers/"+key)
			return benchkit.LockerFunc(func(ctx context.Context) (func(context.Context) error, error) {
					if err := m.Lock(ctx); err != nil {
						return nil, err
					}
					return m.Unlock, nil
				}), func() {
					_ = s.Close()
					_ = cli.Close()
				}, nil
		}}}
	})}
