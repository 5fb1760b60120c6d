package benchkit

import (
	"runtime"
	"time"
)

// CPU is what a run cost the machine's processors, per critical section:
// the figure that bounds throughput once the machine is busy. On this
// project's 2-core build machine clients and servers share the cores, so
// a contended run that keeps them busy (Busy near 1) can go no faster than
// Cores / Machine critical sections per second, whatever the protocol's
// waits; one that leaves them idle is bound by its waits instead (round
// trips, notifications, polls in series).
type CPU struct {
	// Machine is the CPU time of every process on the machine (the
	// servers in their containers, their port proxies, this process) per
	// critical section.
	Machine time.Duration `json:"machine_ns"`
	// Process is this process's share of Machine: the clients' CPU, with
	// the benchmark's own bookkeeping.
	Process time.Duration `json:"process_ns"`
	// Busy is the fraction of the machine's processors busy during the
	// run (0 to 1), and Cores their number.
	Busy  float64 `json:"busy"`
	Cores int     `json:"cores"`
}

// cpuMark is the machine's and this process's CPU time at one moment.
type cpuMark struct {
	at               time.Time
	machine, process time.Duration
	ok               bool
}

// markCPU reads the CPU counters; ok is false where the machine's cannot
// be read (see machineCPU).
func markCPU() cpuMark {
	machine, ok := machineCPU()
	return cpuMark{at: time.Now(), machine: machine, process: processCPU(), ok: ok}
}

// cpuSince is the CPU spent from m to now per section, nil when it cannot
// be told (no counters, or no section).
func cpuSince(m cpuMark, sections int) *CPU {
	now := markCPU()
	if !m.ok || !now.ok || sections <= 0 {
		return nil
	}
	cores := runtime.NumCPU()
	wall := now.at.Sub(m.at)
	machine := now.machine - m.machine
	return &CPU{
		Machine: machine / time.Duration(sections),
		Process: (now.process - m.process) / time.Duration(sections),
		Busy:    min(1, float64(machine)/float64(wall)/float64(cores)),
		Cores:   cores,
	}
}
