package benchkit

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/stat: 100 on every Linux
// architecture Go supports.
const clockTicks = 100

// machineCPU is the time all processors spent busy since boot (every
// state of /proc/stat's "cpu" line but idle, iowait and steal).
func machineCPU() (time.Duration, bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	fields := strings.Fields(line)
	if err != nil || len(fields) < 5 || fields[0] != "cpu" {
		return 0, false
	}
	var busy uint64
	for i, s := range fields[1:] {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, false
		}
		if i == 3 || i == 4 || i == 7 { // idle, iowait, steal (another guest's)
			continue
		}
		if i >= 8 { // guest time is already counted in user time
			break
		}
		busy += n
	}
	return time.Duration(busy) * time.Second / clockTicks, true
}

// processCPU is this process's user and system time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
