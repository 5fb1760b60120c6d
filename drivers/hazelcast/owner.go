package hazelcast

import (
	"context"

	"github.com/hazelcast/hazelcast-go-client"
)

// Ownership. A Hazelcast map lock belongs to a lock context: the pair of the
// client's UUID and a lock ID that travels in the context.Context of each
// call. A context without a lock ID is lock ID 0, which every goroutine of the
// client shares: locking with it would let any other lock or unlock through
// the same client act on the lock. The driver therefore never passes a context
// of its own or of its caller to a lock call: each acquisition gets an owner,
// a lock context made for it alone, and every lock call of that acquisition
// and of its lease runs in a context derived from it (owner.bind).

// ownerKey marks, beneath the lock ID, the context an owner's lock context
// was made from. A context whose Value(ownerKey{}) is an owner was derived
// from that owner's lock context, lock ID included: the driver's tests check
// every lock call for it.
type ownerKey struct{}

// owner is the Hazelcast lock owner of one acquisition and of the lease it
// grants. Lock IDs come from a process-wide counter in the client library,
// so no two owners share one, and two clients never share a lock owner
// because the member tells owners apart by client UUID too.
type owner struct {
	// id is the request ID of the acquisition, for messages.
	id string
	// lock carries the owner's lock ID. It is never cancelled: calls bind
	// their own deadline and cancellation to it.
	lock context.Context
}

// newOwner makes the owner of the acquisition with request ID id.
func newOwner(id string) *owner {
	o := &owner{id: id}
	o.lock = hazelcast.NewLockContext(context.WithValue(context.Background(), ownerKey{}, o))
	return o
}

// bind returns a context for one lock call on behalf of o: it carries o's lock
// ID, and it ends when ctx ends (with ctx's cause) or at ctx's deadline. The
// returned cancel must be called when the call is over.
func (o *owner) bind(ctx context.Context) (context.Context, context.CancelFunc) {
	c, cancelCause := context.WithCancelCause(o.lock)
	cancel := func() { cancelCause(context.Canceled) }
	if deadline, ok := ctx.Deadline(); ok {
		var cancelDeadline context.CancelFunc
		c, cancelDeadline = context.WithDeadline(c, deadline)
		cancel = func() { cancelDeadline(); cancelCause(context.Canceled) }
	}
	stop := context.AfterFunc(ctx, func() { cancelCause(context.Cause(ctx)) })
	return c, func() { stop(); cancel() }
}
