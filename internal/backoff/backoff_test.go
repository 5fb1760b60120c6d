package backoff

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestJitteredSteps(t *testing.T) {
	done := make(chan struct{})
	close(done)
	b := Jittered{First: time.Hour, Limit: 3 * time.Hour}
	for _, want := range []time.Duration{2 * time.Hour, 3 * time.Hour, 3 * time.Hour} {
		if err := b.Sleep(t.Context(), done); !errors.Is(err, context.Canceled) {
			t.Fatalf("Sleep with done closed: %v, want context.Canceled", err)
		}
		if b.step != want {
			t.Errorf("step %v, want %v", b.step, want)
		}
	}
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(errors.New("stop"))
	if err := b.Sleep(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep with ctx ended: %v, want ctx's error", err)
	}
	short := Jittered{First: time.Millisecond, Limit: time.Millisecond}
	if err := short.Sleep(t.Context(), nil); err != nil {
		t.Errorf("Sleep of a millisecond: %v", err)
	}
}
