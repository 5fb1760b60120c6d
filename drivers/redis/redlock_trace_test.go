package redis

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
)

// TestRedLockHandoffTrace is a measurement, not a check (opt-in: set
// DLOCK_TRACE=1): it runs RedLock over five masters with 64 contenders of
// one key, each a Client with a RedLock and go-redis clients of its own (as
// 64 processes would have), every one looping Lock then Unlock, as
// bench/peers' contended run does; a go-redis hook on every client
// timestamps each script request it sends and its reply. It then splits
// each handoff (one holder's Unlock called to the next holder's Lock
// returned) into its serial steps and logs the p50 of each, and counts the
// acquire attempts sent while the lock was free (released on a majority)
// by contenders other than the one that got it next: attempts refused
// because another waiter was the queue's head.
//
//	DLOCK_TRACE=1 go test -run RedLockHandoffTrace -v ./drivers/redis/
//
// DLOCK_TRACE_CONTENDERS and DLOCK_TRACE_SECONDS change the 64 contenders
// and the 5 s run.
func TestRedLockHandoffTrace(t *testing.T) {
	if os.Getenv("DLOCK_TRACE") == "" {
		t.Skip("a measurement: set DLOCK_TRACE=1 to run it")
	}
	contenders := traceEnvInt(t, "DLOCK_TRACE_CONTENDERS", 64)
	runFor := time.Duration(traceEnvInt(t, "DLOCK_TRACE_SECONDS", 5)) * time.Second
	group := ownGroup(t, 5)
	tr := &rlTracer{kinds: map[string]string{
		rlAcquireScript.Hash(): "acquire", acquireScript.Hash(): "acquire",
		fenceScript.Hash(): "fence", releaseScript.Hash(): "release",
		rlRequeueScript.Hash(): "requeue", leaveScript.Hash(): "leave",
	}}
	key := "trace/" + testkit.NewID()
	ctx := t.Context()
	// An observer subscribed to every channel of every master sees each
	// release's notification arrive (as a waiter's connection would), which
	// splits the hop from the release to the next attempt in two.
	var pubs []rlPub
	var pubMu sync.Mutex
	for m, a := range group.Addrs() {
		oc := goredis.NewClient(&goredis.Options{Addr: a})
		t.Cleanup(func() { _ = oc.Close() })
		ps := oc.PSubscribe(ctx, "*")
		if _, err := ps.Receive(ctx); err != nil { // the subscription's confirmation
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ps.Close() })
		go func() {
			for msg := range ps.Channel(goredis.WithChannelSize(1 << 16)) {
				now := time.Now()
				pubMu.Lock()
				pubs = append(pubs, rlPub{master: m, channel: msg.Channel, at: now})
				pubMu.Unlock()
			}
		}()
	}
	var mutexes []dlock.Mutex
	var selves []string
	for c := range contenders {
		var clients []goredis.UniversalClient
		for m, a := range group.Addrs() {
			rc := goredis.NewClient(&goredis.Options{Addr: a, ContextTimeoutEnabled: true})
			rc.AddHook(traceHook{tr: tr, client: c, master: m})
			clients = append(clients, rc)
			t.Cleanup(func() { _ = rc.Close() })
		}
		rl, err := NewRedLock(clients)
		if err != nil {
			t.Fatal(err)
		}
		selves = append(selves, rl.self)
		dc, err := dlock.New(rl)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = dc.Close(context.WithoutCancel(ctx)) })
		m, err := dc.Mutex(key, dlock.WithTTL(8*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		mutexes = append(mutexes, m)
	}
	// A short warm-up (connections dialled, scripts loaded), not traced.
	traceLoop(ctx, t, mutexes, 500*time.Millisecond)
	tr.reset()
	pubMu.Lock()
	pubs = nil
	pubMu.Unlock()
	sections := traceLoop(ctx, t, mutexes, runFor)
	events := tr.take()
	pubMu.Lock()
	seen := slices.Clone(pubs)
	pubMu.Unlock()
	t.Logf("%d contenders, %v: %d critical sections (%.0f/s), %d traced requests (%.1f per section)",
		contenders, runFor, len(sections), float64(len(sections))/runFor.Seconds(), len(events), float64(len(events))/float64(len(sections)))
	analyseRedLock(t, sections, events, len(group.Addrs()), seen, selves)
}

// rlPub is a message the observer received: when, on which master and
// channel.
type rlPub struct {
	master  int
	channel string
	at      time.Time
}

// traceEnvInt is the positive integer in the environment variable name, or
// def.
func traceEnvInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

// traceSection is one critical section of a traced run.
type traceSection struct {
	client         int
	locked, unlock time.Time // Lock returned; Unlock called
	unlocked       time.Time // Unlock returned
	lockCalled     time.Time
}

// traceLoop runs every mutex's Lock/Unlock loop for d and returns the
// critical sections, in the order they were held.
func traceLoop(ctx context.Context, t *testing.T, mutexes []dlock.Mutex, d time.Duration) []traceSection {
	t.Helper()
	runCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var mu sync.Mutex
	var all []traceSection
	var wg sync.WaitGroup
	var firstErr error
	for c, m := range mutexes {
		wg.Go(func() {
			for runCtx.Err() == nil {
				called := time.Now()
				l, err := m.Lock(runCtx)
				if err != nil {
					if runCtx.Err() == nil {
						mu.Lock()
						firstErr = err
						mu.Unlock()
					}
					return
				}
				s := traceSection{client: c, lockCalled: called, locked: time.Now()}
				s.unlock = time.Now()
				err = l.Unlock(ctx)
				s.unlocked = time.Now()
				mu.Lock()
				all = append(all, s)
				if err != nil && firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	slices.SortFunc(all, func(a, b traceSection) int { return a.locked.Compare(b.locked) })
	return all
}

// rlEvent is one traced request: a script run on one master by one
// contender.
type rlEvent struct {
	client, master int
	kind           string
	sent, replied  time.Time
}

// rlTracer collects the events of every contender's clients.
type rlTracer struct {
	kinds  map[string]string // script SHA1 to its name
	mu     sync.Mutex
	events []rlEvent
}

func (tr *rlTracer) add(e rlEvent) {
	tr.mu.Lock()
	tr.events = append(tr.events, e)
	tr.mu.Unlock()
}

func (tr *rlTracer) reset() {
	tr.mu.Lock()
	tr.events = nil
	tr.mu.Unlock()
}

func (tr *rlTracer) take() []rlEvent {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.events)
}

// kindOf names the script a command runs ("other" for anything else).
func (tr *rlTracer) kindOf(cmd goredis.Cmder) string {
	args := cmd.Args()
	if len(args) < 2 {
		return "other"
	}
	s, _ := args[1].(string)
	switch cmd.Name() {
	case "evalsha":
	case "eval":
		sum := sha1.Sum([]byte(s))
		s = hex.EncodeToString(sum[:])
	default:
		return "other"
	}
	if k, ok := tr.kinds[s]; ok {
		return k
	}
	return "other"
}

// traceHook is the go-redis hook of one contender's client of one master.
type traceHook struct {
	tr             *rlTracer
	client, master int
}

func (traceHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h traceHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		sent := time.Now()
		err := next(ctx, cmd)
		h.tr.add(rlEvent{client: h.client, master: h.master, kind: h.tr.kindOf(cmd), sent: sent, replied: time.Now()})
		return err
	}
}

func (h traceHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		sent := time.Now()
		err := next(ctx, cmds)
		h.tr.add(rlEvent{client: h.client, master: h.master, kind: "pipeline", sent: sent, replied: time.Now()})
		return err
	}
}

// analyseRedLock splits every handoff of sections (from sections[i]'s
// Unlock called to sections[i+1]'s Lock returned) into steps, from the
// events of the holder's release and the next holder's winning attempt,
// and logs each step's p50.
func analyseRedLock(t *testing.T, sections []traceSection, events []rlEvent, masters int, pubs []rlPub, selves []string) {
	slices.SortFunc(pubs, func(a, b rlPub) int { return a.at.Compare(b.at) })
	t.Logf("%.2f notifications seen per section", float64(len(pubs))/float64(len(sections)))
	quorum := masters/2 + 1
	byClient := map[int][]rlEvent{}
	counts := map[string]int{}
	for _, e := range events {
		byClient[e.client] = append(byClient[e.client], e)
		counts[e.kind]++
	}
	for _, es := range byClient {
		slices.SortFunc(es, func(a, b rlEvent) int { return a.sent.Compare(b.sent) })
	}
	t.Logf("requests per section by script: %s", perSectionOf(counts, len(sections)))
	steps := map[string][]time.Duration{}
	var order []string
	add := func(name string, d time.Duration) {
		if _, ok := steps[name]; !ok {
			order = append(order, name)
		}
		steps[name] = append(steps[name], d)
	}
	var freeAttempts, freeWindows, retakes, wakeLate int
	var freeTime time.Duration
	for i := 0; i+1 < len(sections); i++ {
		a, b := sections[i], sections[i+1]
		if a.client == b.client {
			retakes++
			continue
		}
		// The holder's release: its release requests sent after Unlock
		// was called.
		var rel []rlEvent
		for _, e := range byClient[a.client] {
			if e.kind == "release" && !e.sent.Before(a.unlock) && e.sent.Before(a.unlocked) {
				rel = append(rel, e)
			}
		}
		// The next holder's winning attempt: its last acquire request to
		// each master before its Lock returned, then its fence requests.
		var acq, fence []rlEvent
		for _, e := range byClient[b.client] {
			if e.sent.After(b.locked) {
				break
			}
			switch e.kind {
			case "acquire":
				acq = append(acq, e)
			case "fence":
				fence = append(fence, e)
			}
		}
		if len(rel) < quorum || len(acq) < masters {
			continue
		}
		acq = acq[len(acq)-masters:]
		won := acq[0].sent
		for _, e := range acq {
			won = minTime(won, e.sent)
		}
		var fenced []rlEvent
		for _, e := range fence {
			if !e.sent.Before(won) {
				fenced = append(fenced, e)
			}
		}
		relSent, relReplies := firstSent(rel), repliesOf(rel)
		acqReplies := repliesOf(acq)
		add("1 Unlock called → release sent", relSent.Sub(a.unlock))
		add("2a release sent → first reply", relReplies[0].Sub(relSent))
		add("2 release sent → reply of the majority ("+fmt.Sprint(quorum)+"th)", relReplies[quorum-1].Sub(relSent))
		add("2b release sent → last reply (Unlock returns after it)", relReplies[len(relReplies)-1].Sub(relSent))
		add("3 release's first reply → next holder's attempt sent (notification)", won.Sub(relReplies[0]))
		// The first notification to the next holder (on its personal
		// channel) that the observer saw after the release was sent.
		i, _ := slices.BinarySearchFunc(pubs, relSent, func(p rlPub, t time.Time) int { return p.at.Compare(t) })
		for ; i < len(pubs); i++ {
			if strings.HasSuffix(pubs[i].channel, ":"+selves[b.client]) {
				break
			}
		}
		if i < len(pubs) && pubs[i].at.Before(b.locked) {
			add("3a release sent → its notification to the next holder seen (observer)", pubs[i].at.Sub(relSent))
			add("3b notification seen → next holder's attempt sent", won.Sub(pubs[i].at))
		}
		if won.Before(a.unlock) {
			wakeLate++ // the winning attempt started before the release (a retry that happened to come after)
		}
		add("4 attempt sent → majority's grant ("+fmt.Sprint(quorum)+"th reply)", acqReplies[quorum-1].Sub(won))
		add("4b attempt sent → last reply (the second phase waits for it)", acqReplies[len(acqReplies)-1].Sub(won))
		last := acqReplies[len(acqReplies)-1]
		if len(fenced) > 0 {
			fs := firstSent(fenced)
			fr := repliesOf(fenced)
			add("5 last reply → fence sent", fs.Sub(last))
			add("6 fence sent → last fence reply", fr[len(fr)-1].Sub(fs))
			last = fr[len(fr)-1]
		}
		add("7 last reply → Lock returns", b.locked.Sub(last))
		add("= handoff: Unlock called → next Lock returns", b.locked.Sub(a.unlock))
		add("  critical section (Lock returned → Unlock called)", a.unlock.Sub(a.locked))
		// Attempts by others while the lock was free on a majority: from
		// the release's majority reply to the winner's attempt.
		free0, free1 := relReplies[quorum-1], won
		if free1.After(free0) {
			freeWindows++
			freeTime += free1.Sub(free0)
			for c, es := range byClient {
				if c == b.client {
					continue
				}
				for _, e := range es {
					if e.kind == "acquire" && e.master == 0 && !e.sent.Before(free0) && e.sent.Before(free1) {
						freeAttempts++
					}
				}
			}
		}
	}
	handoffs := len(steps["= handoff: Unlock called → next Lock returns"])
	t.Logf("%d handoffs analysed; %d times the releaser took the lock again next; %d winning attempts sent before the release",
		handoffs, retakes, wakeLate)
	for _, name := range order {
		ds := steps[name]
		slices.Sort(ds)
		t.Logf("  %-72s p50 %8v  p90 %8v  (n=%d)", name, ds[len(ds)/2].Round(time.Microsecond), ds[len(ds)*9/10].Round(time.Microsecond), len(ds))
	}
	if freeWindows > 0 {
		t.Logf("lock free on a majority, before the winner's attempt: %d handoffs, mean %v; %d attempts by others sent in those windows (%.2f per handoff), all refused",
			freeWindows, (freeTime / time.Duration(freeWindows)).Round(time.Microsecond), freeAttempts, float64(freeAttempts)/float64(freeWindows))
	}
}

func perSectionOf(counts map[string]int, sections int) string {
	var kinds []string
	for k := range counts {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	s := ""
	for _, k := range kinds {
		s += fmt.Sprintf("%s %.2f  ", k, float64(counts[k])/float64(sections))
	}
	return s
}

func firstSent(es []rlEvent) time.Time {
	t := es[0].sent
	for _, e := range es {
		t = minTime(t, e.sent)
	}
	return t
}

// repliesOf returns the reply times of es, in order.
func repliesOf(es []rlEvent) []time.Time {
	var ts []time.Time
	for _, e := range es {
		ts = append(ts, e.replied)
	}
	slices.SortFunc(ts, time.Time.Compare)
	return ts
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
