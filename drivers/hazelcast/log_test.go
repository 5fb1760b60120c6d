package hazelcast

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/hazelcast/hazelcast-go-client/logger"

	"github.com/dlock-go/dlock/internal/testkit"
)

// The client's lines up to the URL's level reach slog at Debug, and
// nothing at all when slog is not at Debug.
func TestLoggerGoesToSlog(t *testing.T) {
	l := newLogger(logger.WarnLevel).CustomLogger
	quiet := testkit.CaptureSlog(t, slog.LevelInfo)
	l.Log(logger.WeightError, func() string { return "connection lost" })
	if quiet.Len() != 0 {
		t.Fatalf("at Info: %q, want nothing", quiet.String())
	}
	verbose := testkit.CaptureSlog(t, slog.LevelDebug)
	l.Log(logger.WeightError, func() string { return "connection lost" })
	l.Log(logger.WeightInfo, func() string { return "member added" })
	if got := verbose.String(); !strings.Contains(got, `msg="connection lost" lib=hazelcast lib_level=error`) || strings.Contains(got, "member added") {
		t.Errorf("at Debug, level warn: %q, want the error line only", got)
	}
}
