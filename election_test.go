package dlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/drivers/memory"
)

// election makes the Election key on c, or ends the test.
func election(t *testing.T, c *dlock.Client, key string, opts ...dlock.Option) dlock.Election {
	t.Helper()
	e, err := c.Election(key, opts...)
	if err != nil {
		t.Fatalf("Election(%q): %v", key, err)
	}
	return e
}

func TestElectionRefusesBadInput(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, memory.NewBackend())
	if _, err := c.Election("e", dlock.WithOwner("o")); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Errorf("Election WithOwner: %v, want ErrInvalidOption", err)
	}
	if _, err := c.Election(""); !errors.Is(err, dlock.ErrInvalidKey) {
		t.Errorf("Election(\"\"): %v, want ErrInvalidKey", err)
	}
	e := election(t, c, "e")
	for _, v := range []string{"", strings.Repeat("x", dlock.MaxValueLen+1), "a\nb", "\xff"} {
		if _, err := e.Campaign(ctx, v); !errors.Is(err, dlock.ErrInvalidValue) {
			t.Errorf("Campaign(%q): %v, want ErrInvalidValue", v, err)
		}
	}
	if err := e.Resign(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("Resign before any Campaign: %v, want ErrNotHeld", err)
	}
	if _, err := e.Leader(ctx); !errors.Is(err, dlock.ErrNoLeader) {
		t.Errorf("Leader of a fresh election: %v, want ErrNoLeader", err)
	}
}

func TestElectionLeaderAndResign(t *testing.T) {
	ctx := context.Background()
	b := memory.NewBackend()
	a, f := election(t, newClient(t, b), "e"), election(t, newClient(t, b), "e")
	l, err := a.Campaign(ctx, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Campaign(ctx, "node-a"); !errors.Is(err, dlock.ErrCampaigning) {
		t.Errorf("second Campaign while leading: %v, want ErrCampaigning", err)
	}
	got, err := f.Leader(ctx)
	if err != nil || got != (dlock.Leadership{Value: "node-a", Term: l.Token()}) {
		t.Fatalf("Leader = %+v, %v; want node-a at term %d", got, err, l.Token())
	}
	won := lockAsync(ctx, func(ctx context.Context) (dlock.Lease, error) { return f.Campaign(ctx, "node-f") })
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-won
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.l.Token() <= l.Token() {
		t.Errorf("next term %d is not above %d", r.l.Token(), l.Token())
	}
	got, err = a.Leader(ctx)
	if err != nil || got != (dlock.Leadership{Value: "node-f", Term: r.l.Token()}) {
		t.Fatalf("Leader = %+v, %v; want node-f at term %d", got, err, r.l.Token())
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := a.Campaign(short, "node-a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Campaign while another leads: %v, want it to wait until its context ends", err)
	}
}

func TestElectionObserveSeesEachLeader(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := memory.NewBackend()
	obs, err := election(t, newClient(t, b), "e").Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	next := func() dlock.Leadership {
		select {
		case l, ok := <-obs:
			if !ok {
				t.Fatal("Observe closed its channel")
			}
			return l
		case <-ctx.Done():
			t.Fatal("no report from Observe")
		}
		return dlock.Leadership{}
	}
	if l := next(); l != (dlock.Leadership{}) {
		t.Fatalf("first report %+v, want no leader", l)
	}
	c := newClient(t, b)
	for i, v := range []string{"one", "two", "three"} {
		l, err := election(t, c, "e").Campaign(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		if got := next(); got != (dlock.Leadership{Value: v, Term: l.Token()}) {
			t.Fatalf("leader %d reported as %+v, want %s at term %d", i, got, v, l.Token())
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if got := next(); got != (dlock.Leadership{}) {
			t.Fatalf("after leader %d resigned: %+v, want no leader", i, got)
		}
	}
	cancel()
	for range obs {
	}
}
