package hazelcast

import (
	"errors"

	"github.com/hazelcast/hazelcast-go-client/hzerrors"
)

// Transient errors. A waiting Lock rides out an error that says "the cluster
// is unavailable for now" (see "Errors" in package driver). The core knows
// broken connections and timeouts by itself, but not the client's own errors
// for a client that is not connected, a member that is starting, stopping or
// migrating partitions, or a call whose target left: the driver marks those.

// unavailable lists the client's errors of a cluster that is unavailable for
// now, and the driver's own for a disconnected client or an unanswered call.
var unavailable = []error{
	errNotConnected, errNoAnswer,
	hzerrors.ErrClientOffline, hzerrors.ErrTargetDisconnected, hzerrors.ErrHazelcastInstanceNotActive,
	hzerrors.ErrIO, hzerrors.ErrRetryableIO, hzerrors.ErrRetryableHazelcast, hzerrors.ErrOperationTimeout,
	hzerrors.ErrMemberLeft, hzerrors.ErrTargetNotMember, hzerrors.ErrCallerNotMember,
	hzerrors.ErrPartitionMigrating, hzerrors.ErrWrongTarget, hzerrors.ErrHazelcastOverLoad,
	hzerrors.ErrLocalMemberReset,
}

// transientError is an error of an unavailable cluster, marked for the core.
type transientError struct{ err error }

func (e transientError) Error() string   { return e.err.Error() }
func (e transientError) Unwrap() error   { return e.err }
func (e transientError) Transient() bool { return true }

// markTransient returns err marked as transient when it is an error of an
// unavailable cluster, and err itself otherwise.
func markTransient(err error) error {
	for _, target := range unavailable {
		if errors.Is(err, target) {
			return transientError{err}
		}
	}
	return err
}
