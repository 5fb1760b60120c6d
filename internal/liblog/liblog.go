// Package liblog carries the log output of the client libraries the
// drivers use (go-redis, go-zookeeper, etcd's zap, Hazelcast's logger) to
// log/slog, where the program decides what to see of it. Every line goes
// to slog.Default() as it is when the line is written, at Debug level, with
// the attribute lib naming the library and, where the library gives one,
// lib_level with the library's own level.
//
// Debug, whatever the library thought of its line: a library logs its
// internals (reconnections, retries, pool dials), and dlock reports what
// matters to its caller through errors and lost leases. The lines show
// when the program asks for debug output (dlock -v does), and cost nothing
// but a check otherwise.
package liblog

import (
	"context"
	"fmt"
	"log/slog"
)

// Enabled reports whether a line of a library's would be written now.
func Enabled(ctx context.Context) bool {
	return slog.Default().Enabled(ctx, slog.LevelDebug)
}

// Log writes msg, a line of the library lib whose own level is libLevel
// (empty when it has none), with attrs.
func Log(ctx context.Context, lib, libLevel, msg string, attrs ...slog.Attr) {
	l := slog.Default()
	if !l.Enabled(ctx, slog.LevelDebug) {
		return
	}
	attrs = append([]slog.Attr{slog.String("lib", lib)}, attrs...)
	if libLevel != "" {
		attrs = append(attrs, slog.String("lib_level", libLevel))
	}
	l.LogAttrs(ctx, slog.LevelDebug, msg, attrs...)
}

// Printf is the logger of a library that takes one with a Printf method
// (go-zookeeper's zk.Logger); its value is the library's name.
type Printf string

// Printf writes one line of the library.
func (p Printf) Printf(format string, args ...any) {
	if Enabled(context.Background()) {
		Log(context.Background(), string(p), "", fmt.Sprintf(format, args...))
	}
}

// PrintfContext is Printf for a library whose Printf takes a context
// first (go-redis's internal.Logging).
type PrintfContext string

// Printf writes one line of the library.
func (p PrintfContext) Printf(ctx context.Context, format string, args ...any) {
	if Enabled(ctx) {
		Log(ctx, string(p), "", fmt.Sprintf(format, args...))
	}
}
