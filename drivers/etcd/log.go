package etcd

import (
	"context"
	"log/slog"
	"maps"
	"slices"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/dlock-go/dlock/internal/liblog"
)

// newLogger returns the zap logger of a client the Driver makes: its lines
// go to slog at Debug (see package liblog) rather than to the process's
// standard error.
func newLogger() *zap.Logger { return zap.New(slogCore{}) }

// slogCore is a zapcore.Core that writes through liblog.
type slogCore struct {
	fields []zapcore.Field // from With
}

// Enabled reports whether slog would write a line now, at any zap level:
// liblog writes them all at Debug.
func (slogCore) Enabled(zapcore.Level) bool { return liblog.Enabled(context.Background()) }

// With returns a core that adds fields to every line.
func (c slogCore) With(fields []zapcore.Field) zapcore.Core {
	return slogCore{fields: append(slices.Clip(c.fields), fields...)}
}

// Check adds the core to ce when the line would be written.
func (c slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

// Write writes one line, its fields as attributes in name order.
func (c slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range append(slices.Clip(c.fields), fields...) {
		f.AddTo(enc)
	}
	attrs := make([]slog.Attr, 0, len(enc.Fields)+1)
	if e.LoggerName != "" {
		attrs = append(attrs, slog.String("logger", e.LoggerName))
	}
	for _, k := range slices.Sorted(maps.Keys(enc.Fields)) {
		attrs = append(attrs, slog.Any(k, enc.Fields[k]))
	}
	liblog.Log(context.Background(), "etcd", e.Level.String(), e.Message, attrs...)
	return nil
}

// Sync has nothing to flush.
func (slogCore) Sync() error { return nil }
