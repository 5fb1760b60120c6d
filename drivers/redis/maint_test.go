package redis

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/internal/testkit"
)

// The clients made from URLs start none of go-redis's maintenance
// notification machinery (see maintOff), not even while their server does
// not answer: with it on, each client (each node client of a Cluster) runs
// a circuit-breaker cleanup goroutine until the handshake on its first
// connection turns the feature off, so against a paused server it runs on.
func TestURLClientsRunNoMaintNotifications(t *testing.T) {
	before := maintGoroutines()
	single, _, err := parseURL(testkit.URL(t, "redis://127.0.0.1:1/0?dial_timeout=50ms"))
	if err != nil {
		t.Fatal(err)
	}
	cluster, _, err := parseClusterURL(testkit.URL(t, "redis+cluster://127.0.0.1:1?dial_timeout=50ms"))
	if err != nil {
		t.Fatal(err)
	}
	rc, cc := goredis.NewClient(single), goredis.NewClusterClient(cluster)
	defer func() { _ = rc.Close(); _ = cc.Close() }()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	_ = rc.Ping(ctx).Err() // nobody answers: the handshake never runs
	_ = cc.Ping(ctx).Err() // makes the seed's node client
	if n := maintGoroutines() - before; n > 0 {
		t.Errorf("clients made from URLs run %d go-redis maintnotifications goroutines, want none", n)
	}
}

// maintGoroutines counts the goroutines running go-redis's maintenance
// notification code.
func maintGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "go-redis/v9/maintnotifications.")
		}
		buf = make([]byte, 2*len(buf))
	}
}
