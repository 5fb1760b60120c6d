package etcd

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"go.uber.org/zap"
)

// The client's zap lines reach slog at Debug, fields and level as
// attributes, and nothing at all when slog is not at Debug.
func TestLoggerGoesToSlog(t *testing.T) {
	var buf bytes.Buffer
	old := slog.Default()
	t.Cleanup(func() { slog.SetDefault(old) })
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	newLogger().Error("lost leader", zap.String("endpoint", "h:2379"))
	if buf.Len() != 0 {
		t.Fatalf("at Info: %q, want nothing", buf.String())
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	newLogger().With(zap.Int("n", 2)).Warn("retrying", zap.String("endpoint", "h:2379"))
	for _, want := range []string{"level=DEBUG", `msg=retrying`, "lib=etcd", "endpoint=h:2379", "n=2", "lib_level=warn"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("at Debug: %q lacks %q", buf.String(), want)
		}
	}
}
