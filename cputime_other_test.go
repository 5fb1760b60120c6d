//go:build !unix

package dlock_test

import "time"

// processCPU is the CPU time the process has used so far, user and system,
// or false where it cannot be had: here it cannot.
func processCPU() (time.Duration, bool) { return 0, false }
