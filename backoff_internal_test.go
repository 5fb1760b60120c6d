package dlock

import (
	"testing"
	"time"
)

func TestBackoffBounds(t *testing.T) {
	b := newBackoff(2*time.Millisecond, 64*time.Millisecond)
	prevMax := time.Duration(0)
	for i := range 20 {
		d := b.next(0)
		ceiling := min(2*time.Millisecond<<i, 64*time.Millisecond)
		if d < ceiling/2 || d > ceiling {
			t.Fatalf("attempt %d: delay %v outside [%v, %v]", i, d, ceiling/2, ceiling)
		}
		prevMax = max(prevMax, d)
	}
	if d := b.next(3 * time.Millisecond); d > 4*time.Millisecond {
		t.Errorf("with the holder expiring in 3ms: got %v, want at most 4ms", d)
	}
	b.reset()
	if d := b.next(0); d > 2*time.Millisecond {
		t.Errorf("after reset: got %v, want at most the minimum", d)
	}
}

func TestSafetyMargin(t *testing.T) {
	if got := safetyMargin(time.Second); got != 12*time.Millisecond {
		t.Errorf("margin of 1s: got %v, want 12ms", got)
	}
}
