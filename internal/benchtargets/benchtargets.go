// Package benchtargets describes each backend to the benchmark kit: how to
// open dlock clients of it (through its registered URL scheme), the raw
// client operations one lock needs, and how to count the requests the
// backend served. Driver benchmarks and the dlock command share it.
//
// The driver packages are not imported here (their own tests use this
// package): whoever uses a target imports its driver for the URL scheme.
package benchtargets

import (
	"context"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/benchkit"
)

// Open returns a target whose clients are opened from url, with no raw
// comparison and no request count: for backends without a richer target.
func Open(name, url string) benchkit.Target {
	return benchkit.Target{
		Name: name,
		NewClient: func(ctx context.Context, opts ...dlock.Option) (*dlock.Client, error) {
			return dlock.Open(ctx, url, opts...)
		},
	}
}

// Memory is the in-process backend under the name "bench" (the memory driver
// must be imported).
func Memory() benchkit.Target { return Open("memory", "mem://bench") }
