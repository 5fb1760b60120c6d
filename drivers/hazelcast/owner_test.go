package hazelcast

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testkit"
)

func TestOwnersAreDistinct(t *testing.T) {
	a, b := newOwner("a"), newOwner("b")
	if a.lock == b.lock {
		t.Fatal("two owners share a lock context")
	}
	if ownerOf(a.lock) != a || ownerOf(b.lock) != b {
		t.Fatal("an owner's lock context does not lead back to it")
	}
	if ownerOf(context.Background()) != nil {
		t.Fatal("a plain context has an owner")
	}
}

// bind must derive the call's context from the owner's lock context, so that
// the client finds the owner's lock ID in it, and take the caller's deadline
// and cancellation.
func TestBindCarriesOwnerDeadlineAndCancellation(t *testing.T) {
	testkit.NoLeaks(t)
	o := newOwner("o")
	deadline := time.Now().Add(time.Hour)
	parent, cancelParent := context.WithDeadline(context.Background(), deadline)
	defer cancelParent()

	ctx, release := o.bind(parent)
	defer release()
	if ownerOf(ctx) != o {
		t.Fatal("the bound context does not carry the owner's lock context")
	}
	if got, ok := ctx.Deadline(); !ok || !got.Equal(deadline) {
		t.Errorf("Deadline() = %v, %t, want %v", got, ok, deadline)
	}
	if ctx.Err() != nil {
		t.Fatalf("the bound context ended early: %v", ctx.Err())
	}
	cause := errors.New("caller gave up")
	parent2, cancel2 := context.WithCancelCause(context.Background())
	ctx2, release2 := o.bind(parent2)
	defer release2()
	cancel2(cause)
	<-ctx2.Done()
	if got := context.Cause(ctx2); !errors.Is(got, cause) {
		t.Errorf("Cause() = %v, want the caller's cause", got)
	}

	// Releasing a binding ends its context and not the owner's.
	release()
	<-ctx.Done()
	if o.lock.Err() != nil {
		t.Fatal("releasing a binding ended the owner's lock context")
	}
}
