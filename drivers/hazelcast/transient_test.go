package hazelcast

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/hazelcast/hazelcast-go-client/hzerrors"

	"github.com/dlock-go/dlock/driver"
)

// The client's errors of an unavailable cluster reach the core marked
// transient, still matching their sentinel; other errors, and a caller's
// ended context, are not marked.
func TestCallErrMarksTransient(t *testing.T) {
	d := newDriver(nil, defaultOptions(), newSession())
	isTransient := func(err error) bool {
		var m interface{ Transient() bool }
		return errors.As(err, &m) && m.Transient()
	}
	for _, err := range []error{
		errNotConnected,
		fmt.Errorf("invoking: %w", hzerrors.ErrClientOffline),
		fmt.Errorf("invoking: %w", hzerrors.ErrTargetDisconnected),
		fmt.Errorf("invoking: %w", hzerrors.ErrHazelcastInstanceNotActive),
		context.DeadlineExceeded, // a call without an answer: errNoAnswer
	} {
		got := d.callErr(context.Background(), err)
		if !isTransient(got) {
			t.Errorf("callErr(%v) = %v, not transient", err, got)
		}
		if !errors.Is(got, err) && !errors.Is(got, errNoAnswer) {
			t.Errorf("callErr(%v) = %v, lost its cause", err, got)
		}
	}
	for _, err := range []error{errNotOwner, driver.ErrNotHeld, hzerrors.ErrIllegalArgument} {
		if got := d.callErr(context.Background(), err); isTransient(got) {
			t.Errorf("callErr(%v) = %v, marked transient", err, got)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := d.callErr(ctx, errNotConnected); got != context.Canceled {
		t.Errorf("callErr with an ended ctx = %v, want ctx.Err()", got)
	}
}
