package benchkit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestPolledContended runs the polling baseline over an in-process lock:
// every goroutine gets its turns, and a failing release fails the run.
func TestPolledContended(t *testing.T) {
	var mu sync.Mutex
	holder := map[string]string{}
	failRelease := false
	p := &Poller{
		Try: func(_ context.Context, key, id string) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			if holder[key] != "" {
				return false, nil
			}
			holder[key] = id
			return true, nil
		},
		Release: func(_ context.Context, key, id string) error {
			mu.Lock()
			defer mu.Unlock()
			if failRelease {
				return errors.New("release failed")
			}
			if holder[key] == id {
				delete(holder, key)
			}
			return nil
		},
		Retry: time.Millisecond,
	}
	c, err := MeasurePolledContended(t.Context(), p, 2, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if c.Goroutines != 2 || c.Clients != 1 || c.PerSecond <= 0 || c.Wait.P50 < 0 {
		t.Errorf("Contended %+v: want 2 goroutines, 1 client, a positive rate", c)
	}
	mu.Lock()
	failRelease = true
	mu.Unlock()
	if _, err := MeasurePolledContended(t.Context(), p, 2, 200*time.Millisecond); err == nil {
		t.Error("a failing release did not fail the run")
	}
}
