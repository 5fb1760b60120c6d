package hazelcast

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hazelcast/hazelcast-go-client/logger"
)

// The client's lines up to the URL's level reach slog at Debug, and
// nothing at all when slog is not at Debug.
func TestLoggerGoesToSlog(t *testing.T) {
	var buf bytes.Buffer
	old := slog.Default()
	t.Cleanup(func() { slog.SetDefault(old) })
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	l := newLogger(logger.WarnLevel).CustomLogger
	l.Log(logger.WeightError, func() string { return "connection lost" })
	if buf.Len() != 0 {
		t.Fatalf("at Info: %q, want nothing", buf.String())
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	l.Log(logger.WeightError, func() string { return "connection lost" })
	l.Log(logger.WeightInfo, func() string { return "member added" })
	if got := buf.String(); !strings.Contains(got, `msg="connection lost" lib=hazelcast lib_level=error`) || strings.Contains(got, "member added") {
		t.Errorf("at Debug, level warn: %q, want the error line only", got)
	}
}
