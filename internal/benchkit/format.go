package benchkit

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Short writes a duration for a table: µs below a millisecond, ms below a
// second, s above; "-" for none.
func Short(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// PerOp writes a count per operation (requests per critical section) for
// a table: "-" for none.
func PerOp(x float64) string {
	if x == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", x)
}

// WriteResults writes v as dir/results.json, making dir if needed.
func WriteResults(dir string, v any) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "results.json"), append(data, '\n'), 0o644)
}
