package liblog

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/internal/testkit"
)

func TestQuietUnlessDebug(t *testing.T) {
	buf := testkit.CaptureSlog(t, slog.LevelInfo)
	Printf("go-zookeeper").Printf("failed to connect to %s", "h:1")
	PrintfContext("go-redis").Printf(context.Background(), "pool: %d", 5)
	Log(context.Background(), "etcd", "error", "lost leader")
	if buf.Len() != 0 {
		t.Errorf("at Info: %q, want nothing", buf.String())
	}
	buf = testkit.CaptureSlog(t, slog.LevelDebug)
	Printf("go-zookeeper").Printf("failed to connect to %s", "h:1")
	PrintfContext("go-redis").Printf(context.Background(), "pool: %d", 5)
	Log(context.Background(), "etcd", "error", "lost leader", slog.Int("n", 1))
	for _, want := range []string{`msg="failed to connect to h:1" lib=go-zookeeper`, `msg="pool: 5" lib=go-redis`, `msg="lost leader" lib=etcd n=1 lib_level=error`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("at Debug: %q lacks %q", buf.String(), want)
		}
	}
}
