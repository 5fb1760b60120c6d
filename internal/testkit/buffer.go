package testkit

import (
	"bytes"
	"log/slog"
	"sync"
	"testing"
)

// Buffer is a bytes.Buffer that a test may read while other goroutines
// write to it: a log sink, or a command's stderr that a client library's
// goroutines may still write to.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Len returns how many bytes were written.
func (b *Buffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}

// CaptureSlog makes slog's default logger write text at level to a Buffer
// until tb ends, and returns the Buffer. The default is process-wide: the
// test must not run in parallel with others that log.
func CaptureSlog(tb testing.TB, level slog.Level) *Buffer {
	tb.Helper()
	var b Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: level})))
	tb.Cleanup(func() { slog.SetDefault(old) })
	return &b
}
