package testserver

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A cluster forms, its nodes answer on the addresses they announce, and a
// node stopped and started again serves its slots once Start returns.
func TestRedisCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := StartRedisCluster(ctx, 3)
	if errors.Is(err, ErrNoDocker) && !Require() {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Terminate(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	if len(c.Addrs()) != 3 || c.URL() == "" {
		t.Fatalf("addrs %v, URL %q", c.Addrs(), c.URL())
	}
	for _, a := range c.Addrs() {
		if err := clusterStateOK(ctx, a); err != nil {
			t.Fatalf("%s: %v", a, err)
		}
	}
	n := c.Nodes[1]
	if err := n.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := clusterStateOK(ctx, n.Addr()); err != nil {
		t.Fatalf("after a restart: %v", err)
	}
}
