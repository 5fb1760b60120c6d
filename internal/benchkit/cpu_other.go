//go:build !linux

package benchkit

import "time"

// machineCPU cannot be read here: runs report no CPU.
func machineCPU() (time.Duration, bool) { return 0, false }

// processCPU is not read where machineCPU cannot be.
func processCPU() time.Duration { return 0 }
