package hazelcast

import (
	"context"

	"github.com/hazelcast/hazelcast-go-client/logger"

	"github.com/dlock-go/dlock/internal/liblog"
)

// slogLogger is the client library's logger of a client the Driver makes:
// its lines up to the URL's log_level go to slog at Debug (see package
// liblog), rather than to the process's standard output.
type slogLogger struct {
	max logger.Weight
}

// newLogger returns the logger for the builtin logger's level (the URL's
// log_level), which the library allows only without a custom logger.
func newLogger(level logger.Level) logger.Config {
	w, err := logger.WeightForLogLevel(level)
	if err != nil {
		w = logger.WeightError
	}
	return logger.Config{CustomLogger: slogLogger{max: w}}
}

// Log writes the line f makes when its weight is within the level and slog
// would write it.
func (l slogLogger) Log(weight logger.Weight, f func() string) {
	ctx := context.Background()
	if weight > l.max || weight == logger.WeightOff || !liblog.Enabled(ctx) {
		return
	}
	liblog.Log(ctx, "hazelcast", weightName(weight), f())
}

// weightName returns the level a weight stands for.
func weightName(w logger.Weight) string {
	for _, level := range logLevels {
		if lw, err := logger.WeightForLogLevel(level); err == nil && lw == w {
			return string(level)
		}
	}
	return ""
}
