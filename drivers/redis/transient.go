package redis

import (
	"errors"

	goredis "github.com/redis/go-redis/v9"
)

// notNow marks an error as transient for the core (it has a Transient
// method, which the core looks for in the chain): the server or the client
// said "not now" rather than "no", so a waiting Lock keeps waiting. Unwrap
// keeps the original error, so errors.Is and errors.As see through it.
type notNow struct{ err error }

func (e notNow) Error() string   { return e.err.Error() }
func (e notNow) Unwrap() error   { return e.err }
func (e notNow) Transient() bool { return true }

// markNotNow wraps err in notNow when it, or an error it wraps or joins,
// means the answer may differ if asked again soon:
//   - CLUSTERDOWN: a Cluster without a quorum of masters or with uncovered
//     slots, as while its nodes restart;
//   - TRYAGAIN: a multi-key command during a slot migration;
//   - LOADING: a server still loading its dataset after a restart;
//   - MASTERDOWN: a replica that lost its master;
//   - READONLY: a write sent to a master that Sentinel has just turned into
//     a replica, before the client follows the failover;
//   - NOREPLICAS: a master configured with min-replicas-to-write that has
//     too few replicas in touch for now;
//   - go-redis's pool timeout: every connection was busy.
//
// Every other error is returned unchanged.
func markNotNow(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[notNow](err); ok {
		return err // already marked
	}
	switch {
	case goredis.IsClusterDownError(err), goredis.IsTryAgainError(err),
		goredis.IsLoadingError(err), goredis.IsMasterDownError(err),
		goredis.IsReadOnlyError(err), goredis.IsNoReplicasError(err),
		errors.Is(err, goredis.ErrPoolTimeout):
		return notNow{err}
	}
	return err
}
