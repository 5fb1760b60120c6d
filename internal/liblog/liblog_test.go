package liblog

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

// swapDefault makes slog's default write to a buffer at level for the
// test, and returns the buffer.
func swapDefault(t *testing.T, level slog.Level) *bytes.Buffer {
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level})))
	t.Cleanup(func() { slog.SetDefault(old) })
	return &buf
}

func TestQuietUnlessDebug(t *testing.T) {
	buf := swapDefault(t, slog.LevelInfo)
	Printf("go-zookeeper").Printf("failed to connect to %s", "h:1")
	PrintfContext("go-redis").Printf(context.Background(), "pool: %d", 5)
	Log(context.Background(), "etcd", "error", "lost leader")
	if buf.Len() != 0 {
		t.Errorf("at Info: %q, want nothing", buf.String())
	}
	buf = swapDefault(t, slog.LevelDebug)
	Printf("go-zookeeper").Printf("failed to connect to %s", "h:1")
	PrintfContext("go-redis").Printf(context.Background(), "pool: %d", 5)
	Log(context.Background(), "etcd", "error", "lost leader", slog.Int("n", 1))
	for _, want := range []string{`msg="failed to connect to h:1" lib=go-zookeeper`, `msg="pool: 5" lib=go-redis`, `msg="lost leader" lib=etcd n=1 lib_level=error`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("at Debug: %q lacks %q", buf.String(), want)
		}
	}
}
