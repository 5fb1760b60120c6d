package redis

import (
	"testing"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

func TestInspect(t *testing.T) {
	d := newTestDriver(t, newRDB(t))
	ctx := ctxFor(t)
	key := testkit.Key(t)
	if info, err := d.Inspect(ctx, key); err != nil || info.Held {
		t.Fatalf("free lock: got %+v, %v", info, err)
	}
	id := testkit.NewID()
	l, err := d.Acquire(ctx, driver.Request{Key: key, ID: id, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := d.Subscribe(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	<-sub.C() // the subscription is live once confirmed
	info, err := d.Inspect(ctx, key)
	if err != nil || !info.Held || info.Owner != id || info.Token != l.Token() || info.TTL <= 0 || info.Waiters != 1 {
		t.Errorf("got %+v, %v; want held by %s, token %d, a TTL and 1 waiter", info, err, id, l.Token())
	}
}
