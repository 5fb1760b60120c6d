// Package testkit holds the small helpers that the tests of every driver
// package, and of cmd/dlock, share: bounded contexts for test steps, keys
// and request IDs no other test uses, and the table checks of URL parsers.
// The servers the tests talk to are package testserver's.
package testkit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// ContextFor returns a function that gives a test step a context bounded
// by timeout, cancelled when the test ends: a package's tests declare their
// bound once,
//
//	var ctxFor = testkit.ContextFor(10 * time.Second)
//
// and call ctxFor(t) for each step, so that a backend that stops answering
// fails the step instead of hanging the test binary.
func ContextFor(timeout time.Duration) func(testing.TB) context.Context {
	return func(tb testing.TB) context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		tb.Cleanup(cancel)
		return ctx
	}
}

// Key returns a lock key that no other test, and no earlier run against an
// external server, uses: "test/", the test's name, and 8 random characters.
func Key(tb testing.TB) string {
	return "test/" + tb.Name() + "/" + rand.Text()[:8]
}

// RunKeys returns keys, each prefixed with tb's [Key] so that a run's
// locks stay apart from an earlier run's, and cut from the front to 1024
// bytes, the longest key the core accepts, keeping each key's own end.
func RunKeys(tb testing.TB, keys []string) []string {
	run := Key(tb)
	out := make([]string, len(keys))
	for i, k := range keys {
		key := run + k
		out[i] = key[max(0, len(key)-1024):]
	}
	return out
}

// NewID returns a request ID shaped as the core makes them
// (driver.Request.ID): 128 random bits as 32 lowercase hex digits.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// Request returns a request for key shaped as the core makes them: a fresh
// ID ([NewID]), ttl, an exclusive lock, no waiting.
func Request(key string, ttl time.Duration) driver.Request {
	return driver.Request{Key: key, ID: NewID(), TTL: ttl}
}

// MustAcquire takes req on d, bounded by ctx, or fails tb.
func MustAcquire(tb testing.TB, ctx context.Context, d driver.Driver, req driver.Request) driver.Lease {
	tb.Helper()
	l, err := d.Acquire(ctx, req)
	if err != nil {
		tb.Fatalf("Acquire(%q): %v", req.Key, err)
	}
	return l
}

// Blocking returns req asking to wait in the backend's queue
// (driver.Request.Block).
func Blocking(req driver.Request) driver.Request {
	req.Block = true
	return req
}

// Client returns a dlock Client over d with opts, or fails tb; it is closed
// when tb ends.
func Client(tb testing.TB, d driver.Driver, opts ...dlock.Option) *dlock.Client {
	tb.Helper()
	c, err := dlock.New(d, opts...)
	if err != nil {
		tb.Fatalf("dlock.New: %v", err)
	}
	tb.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// Mutex returns c's Mutex of key with opts, or fails tb.
func Mutex(tb testing.TB, c *dlock.Client, key string, opts ...dlock.Option) dlock.Mutex {
	tb.Helper()
	m, err := c.Mutex(key, opts...)
	fatalIf(tb, err, "Mutex", key)
	return m
}

// RWMutex returns c's RWMutex of key with opts, or fails tb.
func RWMutex(tb testing.TB, c *dlock.Client, key string, opts ...dlock.Option) dlock.RWMutex {
	tb.Helper()
	m, err := c.RWMutex(key, opts...)
	fatalIf(tb, err, "RWMutex", key)
	return m
}

// Lock locks m with ctx, or fails tb.
func Lock(tb testing.TB, ctx context.Context, m dlock.Mutex) dlock.Lease {
	tb.Helper()
	l, err := m.Lock(ctx)
	fatalIf(tb, err, "Lock", m.Key())
	return l
}

// fatalIf fails tb when err, the error of the call op on key, is not nil.
func fatalIf(tb testing.TB, err error, op, key string) {
	tb.Helper()
	if err != nil {
		tb.Fatalf("%s(%q): %v", op, key, err)
	}
}

// Closing returns what open makes, closed when tb ends, or fails tb,
// naming the call what, when open returns an error: the shape of every
// test's "make a client or driver for this test only".
func Closing[C io.Closer](tb testing.TB, what string, open func() (C, error)) C {
	tb.Helper()
	c, err := open()
	if err != nil {
		tb.Fatalf("%s: %v", what, err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c
}
