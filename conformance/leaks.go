package conformance

import (
	"bytes"
	"context"
	"fmt"
	"runtime/pprof"
	"strings"
	"time"
)

// The goroutine-leak check. Each case runs with a profiler label naming it,
// which every goroutine it starts inherits, and so do the goroutines those
// start, the driver's and its client library's included. Once the case and
// its cleanups have ended, a goroutine that still carries the label is one
// the case left running: a leak of the driver, the core or the suite. The
// label makes the attribution sound although cases run in parallel, and
// although other tests of the process (other Runs) run beside them.

// leakLabel is the profiler label key that names a case's run.
const leakLabel = "dlock-conformance-case"

// leakWait is how long a case's goroutines get to end after the case:
// client libraries end some of theirs asynchronously after Close.
const leakWait = 5 * time.Second

// lingerers are goroutines that outlive the case that started them and are
// no leak, by a function on their stack:
//   - net/http.(*persistConn): the Docker client behind a harness's fault
//     hooks (Pause, Resume, Restart) keeps idle keep-alive connections, with
//     a reader and a writer goroutine each, for its transport's idle timeout,
//     to be reused by the next call; they belong to that client, not to the
//     case.
var lingerers = []string{
	"net/http.(*persistConn).readLoop",
	"net/http.(*persistConn).writeLoop",
}

// runLabelled runs f with the case's label on its goroutine.
func runLabelled(id string, f func()) {
	pprof.Do(context.Background(), pprof.Labels(leakLabel, id), func(context.Context) { f() })
}

// leaked waits up to leakWait for the goroutines labelled id to end, and
// returns the stacks of those that do not.
func leaked(id string) []string {
	deadline := time.Now().Add(leakWait)
	for {
		stacks := labelled(id)
		if len(stacks) == 0 || time.Now().After(deadline) {
			return stacks
		}
		time.Sleep(20 * time.Millisecond) // polling the runtime, which has no notification
	}
}

// labelled returns the goroutine profile's records (stacks, with a count)
// labelled id, but for lingerers.
func labelled(id string) []string {
	var buf bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
	want := fmt.Sprintf("%q:%q", leakLabel, id)
	var out []string
	for _, rec := range strings.Split(buf.String(), "\n\n") {
		if !strings.Contains(rec, "# labels: ") || !strings.Contains(rec, want) {
			continue
		}
		if header, rest, ok := strings.Cut(rec, "\n"); ok && strings.HasPrefix(header, "goroutine profile:") {
			rec = rest
		}
		lingering := false
		for _, fn := range lingerers {
			lingering = lingering || strings.Contains(rec, fn)
		}
		if !lingering {
			out = append(out, rec)
		}
	}
	return out
}
