package redis

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

// checkElection runs a leader election over two Clients of one deployment
// (newDriver opens a driver of it): testkit.ElectionRoundTrip.
func checkElection(t *testing.T, newDriver func(t *testing.T) driver.Driver) {
	ctx, cancel := context.WithTimeout(ctxFor(t), time.Minute)
	defer cancel()
	ca, cb := testkit.Client(t, newDriver(t)), testkit.Client(t, newDriver(t))
	testkit.ElectionRoundTrip(t, ctx, ca, cb, testkit.Key(t))
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
