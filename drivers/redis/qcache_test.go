package redis

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/internal/testkit"
)

// qheadScript runs prelude.lua's qhead on the queue KEYS[1] at the
// millisecond ARGV[1]: {head or false, its g: field or false, its expiry}.
var qheadScript = goredis.NewScript(prelude + `
local head, gi, exp = qhead(KEYS[1], tonumber(ARGV[1]))
return {head or false, gi or false, exp or false}`)

// qdelScript runs prelude.lua's qdel of ARGV[1] on the queue KEYS[1].
var qdelScript = goredis.NewScript(prelude + `qdel(KEYS[1], ARGV[1]) return 1`)

// qenqueueScript runs prelude.lua's enqueue of ARGV[1] with the SEQ ARGV[2]
// on the queue KEYS[1] at the millisecond ARGV[3], for an entry lifetime of
// ARGV[4] ms, as RedLock's ticket script does (no g: field).
var qenqueueScript = goredis.NewScript(prelude + `
enqueue(KEYS[1], ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]))
return 1`)

// The cached order of the waiters' queue ("q:") names the same head as a
// full reading would: when its first name leaves, the next live one; when
// none is live, everything is read again, entries that came later
// included; a cache deleted by an older version, or written by the cache's
// first version (names without SEQs), is rebuilt; and an empty queue
// leaves no key.
func TestQueueHeadFromCachedOrder(t *testing.T) {
	rdb := newRDB(t)
	ctx := ctxFor(t)
	q := testkit.Key(t) + ":waiters"
	const now, later = 1000, 999999
	head := func(want, wantG, wantCache string) {
		t.Helper()
		r, err := qheadScript.Run(ctx, rdb, []string{q}, now).Slice()
		if err != nil {
			t.Fatal(err)
		}
		got, _ := r[0].(string)
		g, _ := r[1].(string)
		if got != want || g != wantG {
			t.Fatalf("qhead: %q with g: %q, want %q with %q", got, g, want, wantG)
		}
		cache, err := rdb.HGet(ctx, q, "q:").Result()
		if err == goredis.Nil {
			cache = "(none)"
		} else if err != nil {
			t.Fatal(err)
		}
		if cache != wantCache {
			t.Fatalf("cached order %q, want %q", cache, wantCache)
		}
	}
	entry := func(seq, exp int) string { return strconv.Itoa(seq) + " " + strconv.Itoa(exp) }
	rdb.HSet(ctx, q, "C", entry(30, later), "A", entry(10, later), "B", entry(20, later), "g:B", "ID 5000 16 3", "g:X", "stale")
	head("A", "", "A@10 B@20 C@30")
	if rdb.HExists(ctx, q, "g:X").Val() {
		t.Error("a full reading left the g: field of a Driver with no entry")
	}
	rdb.HSet(ctx, q, "D", entry(40, later)) // first refused after the reading
	rdb.HDel(ctx, q, "A")
	head("B", "ID 5000 16 3", "B@20 C@30")
	head("B", "ID 5000 16 3", "B@20 C@30") // the cache unchanged when its head is live
	rdb.HSet(ctx, q, "C", entry(30, now))  // lapsed
	rdb.HDel(ctx, q, "B")
	head("D", "", "D@40") // no name live: read again, D included, C deleted
	if rdb.HExists(ctx, q, "C").Val() {
		t.Error("a lapsed entry was left")
	}
	rdb.HDel(ctx, q, "q:") // as a version without the cache does
	head("D", "", "D@40")
	rdb.HSet(ctx, q, "q:", "D") // the cache's first version, without SEQs
	head("D", "", "D@40")
	if err := qdelScript.Run(ctx, rdb, []string{q}, "D").Err(); err != nil {
		t.Fatal(err)
	}
	if n := rdb.Exists(ctx, q).Val(); n != 0 {
		t.Fatalf("the queue's key is left with %v after its last entry went", rdb.HGetAll(ctx, q).Val())
	}
	rdb.HSet(ctx, q, "E", entry(50, now))
	head("", "", "(none)") // only a lapsed entry: no head, no cache, no key
	if n := rdb.Exists(ctx, q).Val(); n != 0 {
		t.Fatalf("the queue's key is left with %v", rdb.HGetAll(ctx, q).Val())
	}
}

// BenchmarkQueueHead measures the server's time per qhead over a queue of
// 64 waiting Drivers: read in full (the cache deleted first, as before the
// cache existed) and from the cached order; and per join, a new entry
// written behind them with the cache there (the check that keeps the
// cache, which a new entry costs, then its HDEL). Server µs from
// commandstats.
//
//	go test -run '^$' -bench QueueHead ./drivers/redis/
func BenchmarkQueueHead(b *testing.B) {
	rdb := newRDB(b)
	ctx := ctxFor(b)
	q := testkit.Key(b) + ":waiters"
	for i := range 64 {
		rdb.HSet(ctx, q, "D"+strconv.Itoa(i), strconv.Itoa(1000+i)+" 999999999999999", "g:D"+strconv.Itoa(i), "ID 5000 16 3")
	}
	full := goredis.NewScript(prelude + `redis.call('HDEL', KEYS[1], 'q:') local h = qhead(KEYS[1], tonumber(ARGV[1])) return h`)
	cached := goredis.NewScript(prelude + `local h = qhead(KEYS[1], tonumber(ARGV[1])) return h`)
	join := goredis.NewScript(prelude + `enqueue(KEYS[1], 'NEW', 1999, tonumber(ARGV[1]), 2000) redis.call('HDEL', KEYS[1], 'NEW') return 1`)
	for _, bc := range []struct {
		name string
		s    *goredis.Script
	}{{"full", full}, {"cached", cached}, {"join", join}} {
		b.Run(bc.name, func(b *testing.B) {
			// A context of its own: the parent's 10 s may end during a
			// later run on a loaded machine.
			ctx := ctxFor(b)
			if err := bc.s.Load(ctx, rdb).Err(); err != nil {
				b.Fatal(err)
			}
			rdb.ConfigResetStat(ctx)
			for b.Loop() {
				if err := bc.s.Run(ctx, rdb, []string{q}, 1000).Err(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(evalshaUsec(b, rdb), "server-µs/op")
		})
	}
}

// evalshaUsec is the server's mean µs per EVALSHA since its stats were
// reset.
func evalshaUsec(b *testing.B, rdb *goredis.Client) float64 {
	info, err := rdb.Info(ctxFor(b), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(info) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:"); ok {
			for kv := range strings.SplitSeq(rest, ",") {
				if v, ok := strings.CutPrefix(kv, "usec_per_call="); ok {
					f, _ := strconv.ParseFloat(v, 64)
					return f
				}
			}
		}
	}
	return 0
}

// qcacheCase is one master's waiters' queue, built entry by entry, with the
// scripts' calls on it.
type qcacheCase struct {
	rdb *goredis.Client
	q   string
	t   *testing.T
}

const (
	qcNow   = 1000       // the scripts' clock, ms
	qcLater = 1000000000 // an expiry far after it
	qcLife  = 2000       // an entry's lifetime, ms
)

// newQcacheCase writes the live entries given (name: SEQ) in a new queue.
func newQcacheCase(t *testing.T, rdb *goredis.Client, entries map[string]int) *qcacheCase {
	c := &qcacheCase{rdb: rdb, q: testkit.Key(t) + ":waiters", t: t}
	for name, seq := range entries {
		c.rdb.HSet(ctxFor(t), c.q, name, strconv.Itoa(seq)+" "+strconv.Itoa(qcLater))
	}
	return c
}

// head is qhead's answer.
func (c *qcacheCase) head() string {
	c.t.Helper()
	r, err := qheadScript.Run(ctxFor(c.t), c.rdb, []string{c.q}, qcNow).Slice()
	if err != nil {
		c.t.Fatal(err)
	}
	got, _ := r[0].(string)
	return got
}

// fullHead is the head a full reading names: the cache is deleted first
// (the reading writes a new one).
func (c *qcacheCase) fullHead() string {
	c.t.Helper()
	c.rdb.HDel(ctxFor(c.t), c.q, "q:")
	return c.head()
}

func (c *qcacheCase) enqueue(name string, seq int) {
	c.t.Helper()
	if err := qenqueueScript.Run(ctxFor(c.t), c.rdb, []string{c.q}, name, seq, qcNow, qcLife).Err(); err != nil {
		c.t.Fatal(err)
	}
}

func (c *qcacheCase) del(name string) {
	c.t.Helper()
	if err := qdelScript.Run(ctxFor(c.t), c.rdb, []string{c.q}, name).Err(); err != nil {
		c.t.Fatal(err)
	}
}

func (c *qcacheCase) cache() string {
	c.t.Helper()
	v, err := c.rdb.HGet(ctxFor(c.t), c.q, "q:").Result()
	if errors.Is(err, goredis.Nil) {
		return "(none)"
	}
	if err != nil {
		c.t.Fatal(err)
	}
	return v
}

// Under RedLock an entry's SEQ is its waiter's ticket, issued by the
// client, so a master may be sent entries out of their order, and a waiter
// may leave and come back with a later ticket. The cached order must still
// name the head a full reading names, or the masters name different heads
// and a free lock is granted to nobody (issue 20: the first version of the
// cache stalled NoDoubleGrantUnderRandomDeadlines over five masters). Each
// case builds one master's queue as such a sequence leaves it, and compares
// qhead's answer with a full reading's.
func TestQueueHeadCacheUnderClientTickets(t *testing.T) {
	rdb := newRDB(t)
	ctx := ctxFor(t)
	check := func(c *qcacheCase, want string) {
		c.t.Helper()
		if got := c.head(); got != want {
			c.t.Errorf("qhead names %q with the cache %q, want %q", got, c.cache(), want)
		}
		if full := c.fullHead(); full != want {
			c.t.Errorf("a full reading names %q, want %q", full, want)
		}
	}
	t.Run("LateSmallerTicket", func(t *testing.T) {
		// X and Y were read (and cached); W's ticket, issued before theirs,
		// reaches this master only now.
		c := newQcacheCase(t, rdb, map[string]int{"X": 30, "Y": 40})
		if h := c.head(); h != "X" {
			t.Fatalf("head %q, want X", h)
		}
		c.enqueue("W", 20)
		check(c, "W")
	})
	t.Run("LateTicketBetweenCachedNames", func(t *testing.T) {
		c := newQcacheCase(t, rdb, map[string]int{"X": 30, "Y": 40})
		c.head()
		c.enqueue("W", 35)
		c.del("X") // X granted: Y or W?
		check(c, "W")
	})
	t.Run("BackWithLaterTicket", func(t *testing.T) {
		// A was granted (taken out of the queue) and waits again with a new
		// ticket: it comes after B now, whatever the cache said of it.
		c := newQcacheCase(t, rdb, map[string]int{"A": 10, "B": 20})
		c.head()
		c.del("A")
		c.enqueue("A", 30)
		check(c, "B")
	})
	t.Run("BackWithSameTicketAfterTrim", func(t *testing.T) {
		// A failed attempt's give-back writes A's entry again with its
		// ticket (redlock_requeue.lua), after a reading dropped A from the
		// cache's front.
		c := newQcacheCase(t, rdb, map[string]int{"A": 10, "B": 20, "C": 30})
		c.head()
		c.del("A")
		if h := c.head(); h != "B" {
			t.Fatalf("head %q, want B", h)
		}
		c.enqueue("A", 10)
		check(c, "A")
	})
	t.Run("EqualTickets", func(t *testing.T) {
		// Two clients' clocks gave the same ticket: every master orders
		// them by name, however its hash lists them.
		c := newQcacheCase(t, rdb, map[string]int{"N": 10, "M": 10, "P": 10})
		check(c, "M")
		c.del("M")
		check(c, "N")
	})
	t.Run("CacheKept", func(t *testing.T) {
		// What keeps the invariant keeps the cache: a renewal, a later
		// ticket, and a lapsed entry renewed while the cache names it.
		c := newQcacheCase(t, rdb, map[string]int{"A": 10, "B": 20})
		c.head()
		c.enqueue("A", 99) // a renewal keeps A's SEQ
		c.enqueue("C", 30)
		c.rdb.HSet(ctx, c.q, "B", "20 "+strconv.Itoa(qcNow)) // lapsed
		c.enqueue("B", 20)
		if got := c.cache(); got != "A@10 B@20" {
			t.Fatalf("cache %q, want it kept as %q", got, "A@10 B@20")
		}
		if v := c.rdb.HGet(ctx, c.q, "A").Val(); !strings.HasPrefix(v, "10 ") {
			t.Fatalf("A's renewed entry %q lost its SEQ", v)
		}
		check(c, "A")
		c.del("A")
		c.del("B")
		if c.head() != "C" || c.cache() != "C@30" {
			t.Fatalf("head %q, cache %q after the cached names left", c.head(), c.cache())
		}
	})
}

// A RedLock waiter whose ticket reaches the masters after each of them
// cached a queue of later tickets is the head on every master, and a free
// lock is granted to it at its first attempt. X's entry, written on every
// master with a ticket an hour ahead and read there (so that the cached
// order names it), stands for waiters that came later but reached the
// masters first; it never lapses during the test. The first version of the
// cache kept naming X, and refused the waiter on every master for as long
// as X's entry lived (issue 20).
func (g *rlGroup) testLateTicketIsHead(t *testing.T) {
	const ttl = 30 * time.Second // wide: every master answers on a loaded machine
	key := testkit.Key(t)
	n := namesOf(DefaultKeyPrefix, key)
	ahead := strconv.FormatInt(time.Now().Add(time.Hour).UnixMicro(), 10)
	lapses := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	for i, c := range g.raw {
		ctx := ctxFor(t)
		if err := c.HSet(ctx, n.waiters(), "X", ahead+" "+lapses).Err(); err != nil {
			t.Fatalf("master %d: %v", i, err)
		}
		c.Expire(ctx, n.waiters(), time.Minute) // left behind by a failing run
		t.Cleanup(func() { c.Del(context.Background(), n.waiters()) })
		head, err := qheadScript.Run(ctx, c, []string{n.waiters()}, time.Now().UnixMilli()).Slice()
		if err != nil {
			t.Fatalf("master %d: %v", i, err)
		}
		if head[0] != "X" || !c.HExists(ctx, n.waiters(), "q:").Val() {
			t.Fatalf("master %d: head %v, cache %q: X not cached as the head", i, head[0], c.HGet(ctx, n.waiters(), "q:").Val())
		}
	}
	waiter := g.open(t, "?node_timeout=5s")
	req := testkit.Request(key, ttl)
	req.Wait = true
	l, err := waiter.Acquire(ctxFor(t), req)
	if err != nil {
		t.Fatalf("the waiter with the least ticket on every master: %v, want a grant", err)
	}
	if err := l.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
}
