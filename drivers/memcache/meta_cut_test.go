package memcache

import (
	"context"
	"testing"

	"github.com/dlock-go/dlock/internal/testkit"
)

// A round whose ctx ends as it reads its last reply succeeds (its replies
// are in), but the cut that ctx set off may land on the connection at any
// later moment: a deadline in the past, which would fail the next round on
// that connection at once with an i/o timeout (seen once in a loaded run, an
// Acquire right after a Release cancelled with its compare-and-delete on
// the wire). Such a connection is closed, never pooled.
func TestRoundEndedByItsCtxIsNotPooled(t *testing.T) {
	mc, sel := newMCSelAt(t, server.URL)
	p := newMetaConns(sel, mc)
	defer p.close()
	addr, err := p.pick(testkit.Key(t))
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.get(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := c.round(ctx, p.timeout, []byte("mn\r\n"), 1, func(int, [][]byte, []byte) error {
		cancel() // ctx ends with the last reply read
		return nil
	}); err != nil {
		t.Fatalf("round: %v (its reply was read before ctx ended)", err)
	}
	if !c.cut {
		t.Fatal("a round whose ctx ended before it returned did not mark its connection cut")
	}
	p.put(addr, c)
	if p.take(addr, c) {
		t.Fatal("a connection that a cut may still reach went back to the pool")
	}
	// A round whose ctx lives on leaves its connection for the next.
	c2, err := p.get(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := c2.round(context.Background(), p.timeout, []byte("mn\r\n"), 1, func(int, [][]byte, []byte) error { return nil }); err != nil || c2.cut {
		t.Fatalf("round: %v, cut %v", err, c2.cut)
	}
	p.put(addr, c2)
	if !p.take(addr, c2) {
		t.Fatal("a healthy connection was not pooled")
	}
	_ = c2.nc.Close()
}
