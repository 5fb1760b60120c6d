package benchkit

import (
	"runtime"
	"testing"
	"time"
)

// TestCPUSince checks the CPU figures of a stretch of work by this
// process: the work is measured in CPU time, not wall time, so a loaded
// machine only makes it take longer.
func TestCPUSince(t *testing.T) {
	if runtime.GOOS != "linux" {
		if cpuSince(markCPU(), 1) != nil {
			t.Fatal("CPU reported where the machine's counters cannot be read")
		}
		return
	}
	m := markCPU()
	if !m.ok {
		t.Fatal("/proc/stat unreadable on Linux")
	}
	const work = 100 * time.Millisecond
	x := 0
	for processCPU()-m.process < work {
		for i := range 100_000 {
			x += i
		}
	}
	_ = x
	c := cpuSince(m, 2)
	if c == nil {
		t.Fatal("no CPU figures")
	}
	if c.Process < work/2 || c.Machine <= 0 || c.Busy <= 0 || c.Busy > 1 || c.Cores != runtime.NumCPU() {
		t.Fatalf("cpuSince = %+v after %v of this process's CPU over 2 sections", *c, work)
	}
	if cpuSince(m, 0) != nil {
		t.Error("CPU per section reported for a run of no section")
	}
}
