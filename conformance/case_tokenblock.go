package conformance

import (
	"github.com/dlock-go/dlock/driver"
)

// testTokenBlock checks the promise of Capabilities.TokenBlock on the
// driver directly: every new grant reserves its block of fencing tokens, so that no
// later grant, on any client, gets a token inside it. The core hands locks
// between its own goroutines with the block's tokens, without the backend: a
// block claimed but not reserved would give two holders one token.
func testTokenBlock(t *T, e *env) {
	d := e.driver(t)
	caps := d.Capabilities()
	if caps.TokenBlock < 2 {
		t.Skipf("the driver does not reserve blocks of tokens (Capabilities.TokenBlock)")
	}
	block := caps.TokenBlock
	other := e.driver(t)
	ctx := t.Context()
	key := e.key("token-block")

	// after checks that a grant's token is past the block of the previous.
	var prev uint64
	after := func(what string, l driver.Lease) {
		if l.Token() == 0 {
			t.Skipf("the driver issues no fencing tokens")
		}
		if prev != 0 && l.Token() < prev+block {
			t.Errorf("%s: token %d, inside the block of %d reserved by the grant of token %d", what, l.Token(), block, prev)
		}
		prev = l.Token()
	}
	for i, dr := range []driver.Driver{d, other, d, d} {
		l, err := dr.Acquire(ctx, e.request(key, e.ttl))
		if err != nil {
			t.Fatalf("Acquire #%d: %v", i+1, err)
		}
		after("Acquire after a release", l)
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release #%d: %v", i+1, err)
		}
	}

	tr := caps.Transferer
	if tr == nil {
		return
	}
	a, err := d.Acquire(ctx, e.request(key, e.ttl))
	if err != nil {
		t.Fatalf("Acquire before a transfer: %v", err)
	}
	after("Acquire before a transfer", a)
	b, err := tr.Transfer(ctx, a, e.request(key, e.ttl))
	if err != nil {
		_ = a.Release(ctx)
		t.Fatalf("Transfer: %v", err)
	}
	after("Transfer", b)
	if err := b.Release(ctx); err != nil {
		t.Fatalf("Release after the transfer: %v", err)
	}
	c, err := other.Acquire(ctx, e.request(key, e.ttl))
	if err != nil {
		t.Fatalf("Acquire after a transferred lock's release: %v", err)
	}
	after("Acquire after a transferred lock's release", c)
	_ = c.Release(ctx)
}
