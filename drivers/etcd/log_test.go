package etcd

import (
	"log/slog"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/dlock-go/dlock/internal/testkit"
)

// The client's zap lines reach slog at Debug, fields and level as
// attributes, and nothing at all when slog is not at Debug.
func TestLoggerGoesToSlog(t *testing.T) {
	quiet := testkit.CaptureSlog(t, slog.LevelInfo)
	newLogger().Error("lost leader", zap.String("endpoint", "h:2379"))
	if quiet.Len() != 0 {
		t.Fatalf("at Info: %q, want nothing", quiet.String())
	}
	verbose := testkit.CaptureSlog(t, slog.LevelDebug)
	newLogger().With(zap.Int("n", 2)).Warn("retrying", zap.String("endpoint", "h:2379"))
	for _, want := range []string{"level=DEBUG", `msg=retrying`, "lib=etcd", "endpoint=h:2379", "n=2", "lib_level=warn"} {
		if !strings.Contains(verbose.String(), want) {
			t.Errorf("at Debug: %q lacks %q", verbose.String(), want)
		}
	}
}
