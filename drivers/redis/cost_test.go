package redis

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
)

// TestCostPerSection measures what a contended critical section costs, in
// figures that do not depend on the machine's load: the server's CPU per
// section by command (INFO commandstats, usec per call), and this
// process's CPU per section (getrusage, so client CPU: core, driver,
// go-redis and pub/sub delivery together), for 64 Drivers taking one lock
// in turn; beside them the same for a SET NX PX + compare-and-delete
// script client that polls every 2 ms (the peers' design, for the server
// side only: its polling makes its client CPU meaningless). A measurement:
// set DLOCK_REDIS_COUNT=1 to run it.
func TestCostPerSection(t *testing.T) {
	if os.Getenv("DLOCK_REDIS_COUNT") == "" {
		t.Skip("a measurement: set DLOCK_REDIS_COUNT=1 to run it")
	}
	rdb := newRDB(t)
	drivers, sections := 64, 2000
	if n, err := strconv.Atoi(os.Getenv("DLOCK_REDIS_DRIVERS")); err == nil {
		drivers = n
	}
	if n, err := strconv.Atoi(os.Getenv("DLOCK_REDIS_SECTIONS")); err == nil {
		sections = n
	}
	key := testkit.Key(t)
	var ms []dlock.Mutex
	for range drivers {
		c := testkit.Client(t, newTestDriver(t, newRDB(t)), dlock.WithTTL(grantTTL))
		m := testkit.Mutex(t, c, key)
		l := testkit.Lock(t, ctxFor(t), m) // loads the scripts, opens connections
		_ = l.Unlock(ctxFor(t))
		ms = append(ms, m)
	}
	resetStats(t, rdb)
	slow := os.Getenv("DLOCK_REDIS_SLOWLOG") != ""
	if slow {
		// Every call, to split the scripts' time by script (the log's
		// own cost inflates every figure).
		rdb.ConfigSet(ctxFor(t), "slowlog-max-len", "1000000")
		rdb.ConfigSet(ctxFor(t), "slowlog-log-slower-than", "0")
		rdb.SlowLogReset(ctxFor(t))
	}
	cpu := processCPU()
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	mallocs := mem.Mallocs
	lockInTurns(t, ms, sections/drivers)
	client := processCPU() - cpu
	runtime.ReadMemStats(&mem)
	t.Logf("dlock, %d Drivers: client CPU %.1f µs per section, %.0f allocations per section", drivers, float64(client.Microseconds())/float64(sections), float64(mem.Mallocs-mallocs)/float64(sections))
	logStats(t, rdb, "dlock", sections)
	if slow {
		rdb.ConfigSet(ctxFor(t), "slowlog-log-slower-than", "10000")
		logScripts(t, rdb)
	}

	// The peers' design: SET NX PX, a compare-and-delete script, polling.
	resetStats(t, rdb)
	del := goredis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
	var n int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			c := newRDB(t)
			id := strconv.Itoa(i)
			for {
				mu.Lock()
				done := n >= sections
				mu.Unlock()
				if done {
					return
				}
				ok, err := c.SetNX(ctxFor(t), key+"/raw", id, grantTTL).Result()
				if err != nil {
					t.Error(err)
					return
				}
				if !ok {
					time.Sleep(2 * time.Millisecond) // the peers' retry, not synchronisation
					continue
				}
				if err := del.Run(ctxFor(t), c, []string{key + "/raw"}, id).Err(); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				n++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	logStats(t, rdb, "SET NX + script", sections)
}

// processCPU is the CPU time this process has used (user and system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func resetStats(t *testing.T, rdb *goredis.Client) {
	t.Helper()
	if err := rdb.ConfigResetStat(ctxFor(t)).Err(); err != nil {
		t.Fatal(err)
	}
}

// logStats logs the server's calls and CPU per section by command.
func logStats(t *testing.T, rdb *goredis.Client, what string, sections int) {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var total float64
	var b strings.Builder
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_")
		if !ok {
			continue
		}
		name, fields, _ := strings.Cut(rest, ":")
		if name == "config" || name == "info" {
			continue
		}
		var calls, usec float64
		for _, f := range strings.Split(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "calls":
				calls, _ = strconv.ParseFloat(v, 64)
			case "usec":
				usec, _ = strconv.ParseFloat(v, 64)
			}
		}
		total += usec
		fmt.Fprintf(&b, " %s %.2f calls/cs %.1f µs/call;", name, calls/float64(sections), usec/max(calls, 1))
	}
	t.Logf("%s: server %.1f µs per section:%s", what, total/float64(sections), b.String())
}

// logScripts logs the calls and the mean duration of each script in the
// slow log.
func logScripts(t *testing.T, rdb *goredis.Client) {
	t.Helper()
	logs, err := rdb.SlowLogGet(ctxFor(t), -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	byHash := map[string]string{acquireScript.Hash(): "acquire", releaseScript.Hash(): "release", leaveScript.Hash(): "leave", extendScript.Hash(): "extend"}
	type agg struct {
		n   int
		sum time.Duration
	}
	per := map[string]*agg{}
	for _, l := range logs {
		if len(l.Args) < 2 || !strings.EqualFold(l.Args[0], "evalsha") {
			continue
		}
		name := byHash[l.Args[1]]
		if name == "" {
			name = l.Args[1]
		}
		a := per[name]
		if a == nil {
			a = &agg{}
			per[name] = a
		}
		a.n++
		a.sum += l.Duration
	}
	for name, a := range per {
		t.Logf("script %s: %d calls, %.1f µs per call", name, a.n, float64(a.sum.Microseconds())/float64(a.n))
	}
}

// lockInTurns has every Mutex of ms Lock and Unlock n times, all at once,
// and returns when they are done (failures are the test's errors).
func lockInTurns(t *testing.T, ms []dlock.Mutex, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Go(func() {
			for range n {
				l, err := m.Lock(ctxFor(t))
				if err != nil {
					t.Error(err)
					return
				}
				if err := l.Unlock(ctxFor(t)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}
