package memory_test

import (
	"testing"

	"github.com/dlock-go/dlock/internal/benchkit"
	"github.com/dlock-go/dlock/internal/benchtargets"
)

// BenchmarkSuite measures the core itself over the in-process backend: the
// cost dlock adds, with no network. Run with -benchtime=1x.
func BenchmarkSuite(b *testing.B) { benchkit.Run(b, benchtargets.Memory()) }
