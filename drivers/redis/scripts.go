package redis

import (
	"embed"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// The Lua scripts are the whole protocol. Each runs atomically on the
// server, so no other client's command falls between its reads and writes,
// and each costs one round trip.
//
// They live in lua/, one file per script, each read alone: its header says
// what it does, its KEYS, its ARGV and its reply. lua/prelude.lua holds the
// functions the lock scripts share, and documents the lock hash, PREFIX{T},
// and the waiters' queue, PREFIX{T}:waiters. A file's header (the comment
// lines it starts with) is not sent to the server; the rest is, as it is,
// behind the prelude for every script but leave.lua.

//go:embed lua/*.lua
var luaFiles embed.FS

// luaScript returns the Lua of lua/NAME.lua less its header.
func luaScript(name string) string {
	b, err := luaFiles.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic(err) // a file the pattern above embeds, or a typo here
	}
	s := string(b)
	for strings.HasPrefix(s, "--") {
		_, s, _ = strings.Cut(s, "\n")
	}
	return s
}

// prelude is the Lua shared by the lock scripts (lua/prelude.lua).
var prelude = luaScript("prelude")

// acquireScript takes the lock, or enters it again, and issues fencing
// tokens (lua/acquire.lua).
var acquireScript = goredis.NewScript(prelude + luaScript("acquire"))

// anyAcquireScript takes the first free lock among several
// (lua/anyacquire.lua): it runs acquire.lua's body, wrapped as a Lua
// function, for each request in turn, so that its grants follow
// acquireScript's rules by construction rather than by a second copy.
var anyAcquireScript = goredis.NewScript(prelude + anyAcquireFunc + luaScript("anyacquire"))

// anyAcquireFunc is acquire.lua's body as the local function acquireOne,
// whose parameters KEYS and ARGV shadow the script's own, so that each call
// sees one request's keys and arguments where acquire.lua reads them.
var anyAcquireFunc = "local function acquireOne(KEYS, ARGV)\n" + luaScript("acquire") + "\nend\n"

// fenceScript raises the fencing counter to a token issued elsewhere, and
// gives this request's holds that token: RedLock's second phase
// (lua/fence.lua).
var fenceScript = goredis.NewScript(prelude + luaScript("fence"))

// extendScript pushes one hold's expiry out, if the hold is still there
// (lua/extend.lua).
var extendScript = goredis.NewScript(prelude + luaScript("extend"))

// releaseScript removes one hold, if it is still there, and when that frees
// the lock grants it to the waiters' queue's head, or wakes the key's
// waiters (lua/release.lua).
var releaseScript = goredis.NewScript(prelude + luaScript("release"))

// transferScript hands an exclusive lock from one hold to a new request in
// one step (lua/transfer.lua).
var transferScript = goredis.NewScript(prelude + luaScript("transfer"))

// leaveScript takes a Driver out of a lock's waiters' queue (lua/leave.lua,
// which runs without the prelude).
var leaveScript = goredis.NewScript(luaScript("leave"))

// inspectScript describes the lock without changing it (lua/inspect.lua).
var inspectScript = goredis.NewScript(prelude + luaScript("inspect"))

// millis renders ttl for the scripts and PEXPIRE: whole milliseconds,
// rounded up so that the backend never promises less than the core asked
// for.
func millis(ttl time.Duration) string {
	return strconv.FormatInt(int64((ttl+time.Millisecond-1)/time.Millisecond), 10)
}

// maxWriterWait bounds how long a refused writer keeps new readers out
// (acquireScript's ARGV[5]): the writer's own TTL, at most this. A waiting
// writer renews its mark at every attempt, at least every third of it; one
// that gave up (a TryLock, a cancelled Lock) delays new readers by no more.
const maxWriterWait = time.Second

// writerWait is acquireScript's ARGV[5] for a request with ttl.
func writerWait(ttl time.Duration) string { return millis(min(ttl, maxWriterWait)) }
