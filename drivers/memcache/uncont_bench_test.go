package memcache

import (
	"bufio"
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
)

// BenchmarkUncontendedCost counts what one uncontended Lock and Unlock
// costs, in figures a loaded machine skews less than timings: allocations
// per op (-benchmem), this process's CPU per op (cpu-ns/op, getrusage:
// core, driver and gomemcache together), its read and write system calls
// per op (rw-syscalls/op, /proc/self/io) and the server's CPU per op
// (srv-ns/op, memcached's rusage in "stats"). "dlock" is a Driver that
// knows its selector (the meta path, as one made from a URL); "raw" is the
// peers' design, add then delete, through a gomemcache client made the
// same way. ns/op is timed and only meaningful on a quiet machine; compare
// dlock with raw within one run.
//
//	go test -run '^$' -bench UncontendedCost -benchmem -benchtime 5000x ./drivers/memcache/
func BenchmarkUncontendedCost(b *testing.B) {
	b.Run("dlock", func(b *testing.B) {
		mc, sel := newMCSelAt(b, server.URL)
		c := testkit.Client(b, newTestDriver(b, mc, WithSelector(sel)), dlock.WithTTL(15*time.Second))
		m := testkit.Mutex(b, c, testkit.Key(b))
		ctx := context.Background()
		op := func() {
			l, err := m.Lock(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
		}
		op() // opens the connections before the count
		costLoop(b, op)
	})
	b.Run("raw", func(b *testing.B) {
		mc := newMCAt(b, server.URL)
		key := namesOf("bench-raw:", testkit.Key(b)).lock
		op := func() {
			if err := mc.Add(&gomemcache.Item{Key: key, Value: []byte(testkit.NewID()), Expiration: 15}); err != nil {
				b.Fatal(err)
			}
			if err := mc.Delete(key); err != nil {
				b.Fatal(err)
			}
		}
		op()
		costLoop(b, op)
	})
}

// costLoop runs op b.N times and reports this process's CPU and the
// server's per op.
func costLoop(b *testing.B, op func()) {
	b.Helper()
	addr := serverAddrs(b, server.URL)[0]
	srv := serverCPU(b, addr)
	b.ReportAllocs()
	b.ResetTimer()
	cpu, calls := clientCPU(), ioSyscalls()
	for b.Loop() {
		op()
	}
	b.StopTimer()
	b.ReportMetric(float64(clientCPU()-cpu)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(ioSyscalls()-calls)/float64(b.N), "rw-syscalls/op")
	b.ReportMetric(float64(serverCPU(b, addr)-srv)/float64(b.N), "srv-ns/op")
}

// clientCPU is the CPU time this process has used (user and system).
func clientCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ioSyscalls is how many read and write system calls this process has made
// (syscr and syscw of /proc/self/io), or 0 where that is not to be had.
func ioSyscalls() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	var n int64
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		if k == "syscr" || k == "syscw" {
			c, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			n += c
		}
	}
	return n
}

// serverCPU is the CPU time the memcached at addr has used (rusage_user
// plus rusage_system of its "stats", to the microsecond).
func serverCPU(b *testing.B, addr string) time.Duration {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := nc.Write([]byte("stats\r\n")); err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	r := bufio.NewReader(nc)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			b.Fatal(err)
		}
		line = strings.TrimSpace(line)
		if line == "END" {
			return total
		}
		f := strings.Fields(line)
		if len(f) == 3 && (f[1] == "rusage_user" || f[1] == "rusage_system") {
			s, err := strconv.ParseFloat(f[2], 64)
			if err != nil {
				b.Fatal(err)
			}
			total += time.Duration(s * float64(time.Second))
		}
	}
}
