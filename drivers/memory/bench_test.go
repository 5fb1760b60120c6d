package memory_test

import (
	"context"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/drivers/memory"
	"github.com/dlock-go/dlock/internal/benchkit"
)

// BenchmarkSuite measures the core itself over the in-process backend: the
// cost dlock adds, with no network. Run with -benchtime=1x.
func BenchmarkSuite(b *testing.B) {
	backend := memory.NewBackend()
	benchkit.Run(b, benchkit.Target{
		Name: "memory",
		NewClient: func(_ context.Context, opts ...dlock.Option) (*dlock.Client, error) {
			return dlock.New(memory.New(backend), opts...)
		},
	})
}
