package redis

import (
	"strconv"
	"strings"
	"testing"

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

// The cached order of the waiters' queue ("q:") names the same head as a
// full reading would: when its first name leaves, the next live one; when
// none is live, everything is read again, entries that came later
// included; a cache deleted by an older version is rebuilt; and an empty
// queue leaves no key.
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
	head("A", "", "A B C")
	if rdb.HExists(ctx, q, "g:X").Val() {
		t.Error("a full reading left the g: field of a Driver with no entry")
	}
	rdb.HSet(ctx, q, "D", entry(40, later)) // first refused after the reading
	rdb.HDel(ctx, q, "A")
	head("B", "ID 5000 16 3", "B C")
	head("B", "ID 5000 16 3", "B C")      // the cache unchanged when its head is live
	rdb.HSet(ctx, q, "C", entry(30, now)) // lapsed
	rdb.HDel(ctx, q, "B")
	head("D", "", "D") // no name live: read again, D included, C deleted
	if rdb.HExists(ctx, q, "C").Val() {
		t.Error("a lapsed entry was left")
	}
	rdb.HDel(ctx, q, "q:") // as a version without the cache does
	head("D", "", "D")
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
// cache existed) and from the cached order. Server µs from commandstats.
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
	for _, bc := range []struct {
		name string
		s    *goredis.Script
	}{{"full", full}, {"cached", cached}} {
		b.Run(bc.name, func(b *testing.B) {
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
