package testserver

import "context"

// StartEtcdTimed starts a single-member etcd container as [StartEtcd]
// does, with the Raft timing flags timing instead of [EtcdTiming]: a
// member whose election timeout makes its minimum lease TTL longer.
func StartEtcdTimed(ctx context.Context, timing []string) (*Server, error) {
	if err := prepare(ctx, EtcdImage); err != nil {
		return nil, err
	}
	srv, err := startAt(ctx, func(hostPort int) Spec {
		s := EtcdSpec(hostPort)
		peer := "http://127.0.0.1:" + etcdPeerPort
		s.Name = "etcd-timed"
		s.Cmd = etcdFlags("dlock", hostPort, peer, "dlock="+peer, "dlock-test", timing)
		return s
	})
	if err != nil {
		return nil, err
	}
	if err := srv.ready(ctx); err != nil {
		return nil, err
	}
	return srv, nil
}
