package redis

import (
	"context"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

// checkElection runs a leader election over two Clients of one deployment
// (newDriver opens a driver of it): the leader's Leader, seen from the
// other Client, is its value and its lease's token, and an Observe from
// the other Client reports the two leaders in turn, in order.
func checkElection(t *testing.T, newDriver func(t *testing.T) driver.Driver) {
	newClient := func() *dlock.Client {
		c, err := dlock.New(newDriver(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		return c
	}
	key := testkit.Key(t)
	a, err := newClient().Election(key)
	if err != nil {
		t.Fatal(err)
	}
	f, err := newClient().Election(key)
	if err != nil {
		t.Fatal(err)
	}
	obsCtx, stop := context.WithCancel(context.Background())
	defer stop()
	seen, err := f.Observe(obsCtx)
	if err != nil {
		t.Fatal(err)
	}
	// next returns the next leader Observe reports, skipping vacancies.
	next := func(when string) dlock.Leadership {
		t.Helper()
		ctx := ctxFor(t)
		for {
			select {
			case got, ok := <-seen:
				if !ok {
					t.Fatalf("%s: Observe ended", when)
				}
				if got.Term != 0 {
					return got
				}
			case <-ctx.Done():
				t.Fatalf("%s: Observe reported no leader in time", when)
			}
		}
	}

	la, err := a.Campaign(ctxFor(t), "node-a")
	if err != nil {
		t.Fatal(err)
	}
	want := dlock.Leadership{Value: "node-a", Term: la.Token()}
	if got, err := f.Leader(ctxFor(t)); err != nil || got != want {
		t.Errorf("Leader from the other Client = %+v, %v; want %+v", got, err, want)
	}
	if got := next("first leader"); got != want {
		t.Errorf("Observe reported %+v first; want %+v", got, want)
	}
	if err := a.Resign(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	lf, err := f.Campaign(ctxFor(t), "node-f")
	if err != nil {
		t.Fatal(err)
	}
	want2 := dlock.Leadership{Value: "node-f", Term: lf.Token()}
	if got, err := a.Leader(ctxFor(t)); err != nil || got != want2 {
		t.Errorf("Leader from the other Client = %+v, %v; want %+v", got, err, want2)
	}
	if got := next("second leader"); got != want2 || got.Term <= want.Term {
		t.Errorf("Observe reported %+v second; want %+v, a later term than %d", got, want2, want.Term)
	}
	if err := f.Resign(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
}

// TestElection runs a leader election on the package's server.
func TestElection(t *testing.T) {
	server.Need(t)
	checkElection(t, func(t *testing.T) driver.Driver {
		d, err := open(ctxFor(t), testkit.URL(t, server.URL))
		if err != nil {
			t.Fatal(err)
		}
		return d
	})
}
