package etcd

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// transientError marks an error that a waiting Lock rides out: dlock's
// core retries, with backoff, an acquisition that failed with an error
// whose chain has a Transient method returning true. Unwrap keeps the
// original error visible to errors.Is and errors.As.
type transientError struct{ err error }

func (e *transientError) Error() string   { return e.err.Error() }
func (e *transientError) Unwrap() error   { return e.err }
func (e *transientError) Transient() bool { return true }

// markTransient returns err marked transient when it says that etcd is
// unavailable for now (gRPC code Unavailable: a connection refused or
// broken, no leader, a request timed out in the server, a leader change),
// or that the session lease was lost while a request waited (the next
// attempt queues under a new session). Any other error is returned as it
// is.
func markTransient(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*transientError](err); ok {
		return err
	}
	if errors.Is(err, ErrSessionLost) || unavailable(err) {
		return &transientError{err}
	}
	return err
}

// unavailable reports whether err carries gRPC code Unavailable, as a gRPC
// status or as one of etcd's own errors.
func unavailable(err error) bool {
	if ee, ok := errors.AsType[rpctypes.EtcdError](err); ok {
		return ee.Code() == codes.Unavailable
	}
	if s, ok := errors.AsType[grpcStatus](err); ok {
		return s.GRPCStatus().Code() == codes.Unavailable
	}
	return false
}

// grpcStatus is an error that carries a gRPC status.
type grpcStatus interface {
	error
	GRPCStatus() *status.Status
}

// ctxErr returns ctx's error, waiting for it when ctx's deadline has passed
// but its timer has not fired yet: gRPC sends the deadline to etcd, which
// may answer "request timed out" (or gRPC "deadline exceeded") a moment
// before ctx ends here, and that failure is the context's, not the
// server's.
func ctxErr(ctx context.Context) error {
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		<-ctx.Done()
	}
	return ctx.Err()
}
