package redis

import (
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// The Lua scripts below are the whole protocol. Each runs atomically on the
// server, so no other client's command falls between its reads and writes,
// and each costs one round trip.
//
// # The lock hash
//
// One lock is one hash, PREFIX{T}, whatever its mode: the plain exclusive
// lock, the write lock and the read lock of a key are the same lock, so a
// Mutex and an RWMutex on one key exclude each other. Its fields:
//
//	mode     "x" (exclusive: one holder, or the entries of one reentrant
//	         owner) or "s" (shared: readers); absent when nobody holds it
//	h:ID     one per hold (a grant or a reentrant entry), ID being the
//	         request ID: "EXPIRY TOKEN OWNER", EXPIRY in milliseconds of
//	         the server's clock, TOKEN the fencing token of the grant, OWNER
//	         the reentrant owner (possibly empty, and possibly containing
//	         spaces: it is everything after the second space)
//	wait     set by a writer that readers keep out: the millisecond until
//	         which new readers are refused (see acquireScript)
//
// Every hold expires on its own: Redis 7.0 (Debian bookworm's) has no
// per-field TTL, so the scripts compare each hold's EXPIRY with the server's
// TIME, prune the holds that have passed, and set the key's own expiry to
// the latest EXPIRY left (deleting the key when none is). A reader's lease is
// therefore renewed and lost independently of every other reader's, and a
// reentrant entry leaked by a crashed client ends by its own TTL even while
// another entry of the same owner is renewed. Expired holds no script has
// pruned yet are ignored by every script.
//
// A key of another type, or a hash that does not parse as this layout (an
// operator's value, or a lock written by an older version of this driver,
// which used a plain string), is a lock held by a stranger: acquisitions are
// refused with its PTTL, and extensions and releases change nothing. Older
// versions read a hash the same way (their GET fails), so mixed versions
// exclude each other during an upgrade; both advance the same fencing
// counter.

// prelude is the Lua shared by the lock scripts: loading the lock hash
// (pruning expired holds) and saving what changed.
const prelude = `
local function clock()
  local t = redis.call('TIME')
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  return us, math.floor(us / 1000)
end

-- load returns the live state of the lock at key, or nil when key holds
-- something that is not a lock of this layout. raw is the key's HGETALL
-- reply when the caller has read it already.
local function load(key, now, raw)
  local s = {holds = {}, n = 0, wait = 0, hset = {}, hdel = {}}
  -- One command: a missing key reads as an empty hash, and a key of
  -- another type fails (WRONGTYPE), which pcall turns into a table.
  raw = raw or redis.pcall('HGETALL', key)
  if raw.err then return nil end
  local mode, wait
  for i = 1, #raw, 2 do
    local f, v = raw[i], raw[i + 1]
    if f == 'mode' then
      mode = v
    elseif f == 'wait' then
      wait = tonumber(v)
      if not wait then return nil end
    elseif string.sub(f, 1, 2) == 'h:' then
      local exp, tok, owner = string.match(v, '^(%d+) (%d+) (.*)$')
      if not exp then return nil end
      exp = tonumber(exp)
      if exp > now then
        s.holds[string.sub(f, 3)] = {exp, tonumber(tok), owner}
        s.n = s.n + 1
      else
        s.hdel[#s.hdel + 1] = f
      end
    else
      return nil
    end
  end
  if s.n > 0 then
    if mode ~= 'x' and mode ~= 's' then return nil end
    s.mode = mode
  end
  s.stored = mode
  if wait then
    if wait > now then s.wait = wait else s.hdel[#s.hdel + 1] = 'wait' end
  end
  return s
end

-- holdValue is a hold's field value, "EXPIRY TOKEN OWNER", as load reads it.
local function holdValue(exp, tok, owner)
  return string.format('%.0f %.0f ', exp, tok) .. owner
end

local function put(s, id, exp, tok, owner)
  if not s.holds[id] then s.n = s.n + 1 end
  s.holds[id] = {exp, tok, owner}
  s.hset[#s.hset + 1] = 'h:' .. id
  s.hset[#s.hset + 1] = holdValue(exp, tok, owner)
end

local function drop(s, id)
  s.holds[id] = nil
  s.n = s.n - 1
  s.hdel[#s.hdel + 1] = 'h:' .. id
end

local function setwait(s, wait)
  s.wait = wait
  s.hset[#s.hset + 1] = 'wait'
  s.hset[#s.hset + 1] = string.format('%.0f', wait)
end

-- last returns the latest expiry of the lock's holds, or 0.
local function last(s)
  local m = 0
  for _, h in pairs(s.holds) do
    if h[1] > m then m = h[1] end
  end
  return m
end

-- advance moves the fencing counter at key past every token it issued,
-- reserving block tokens (the new token and the block-1 after it, which
-- the holder's Client may hand to its own goroutines), and returns the new
-- token, or nil and an error reply when the counter holds no number below
-- 2^53 (and then nothing was written).
local function advance(key, us, block)
  local prev = tonumber(redis.pcall('GET', key) or '0')
  if prev == nil or prev < 0 or prev >= 9007199254740991 - block then
    return nil, redis.error_reply('dlock: the fencing counter holds no number below 2^53')
  end
  local token = math.max(prev + 1, us)
  redis.call('SET', key, string.format('%.0f', token + block - 1))
  return token
end

-- The waiters' queue, a hash at its own key: one field per Driver that
-- waits for the lock (Lock, not TryLock), "SEQ EXPIRY", SEQ the server's
-- µs at its first refusal (the queue's order) and EXPIRY the millisecond
-- its entry lapses unless a new attempt renews it. A free lock goes to the
-- queue's head only; a release names the head in its message, so only that
-- Driver's waiters wake. An entry lapses when its Driver stops asking (a
-- crash), so a dead head delays the others by one entry lifetime at most.

-- qhead returns the queue's head, deleting lapsed entries, or nil.
local function qhead(qkey, now)
  local raw = redis.pcall('HGETALL', qkey)
  if raw.err then return nil end
  local head, hseq
  for i = 1, #raw, 2 do
    local seq, exp = string.match(raw[i + 1], '^(%d+) (%d+)$')
    seq, exp = tonumber(seq), tonumber(exp)
    if not seq or exp <= now then
      redis.call('HDEL', qkey, raw[i])
    elseif not head or seq < hseq then
      head, hseq = raw[i], seq
    end
  end
  return head
end

-- enqueue adds waiter at the queue's tail, or renews its entry in place.
local function enqueue(qkey, waiter, us, now, life)
  local cur = redis.call('HGET', qkey, waiter)
  local seq = cur and string.match(cur, '^(%d+) ') or string.format('%.0f', us)
  redis.call('HSET', qkey, waiter, seq .. ' ' .. string.format('%.0f', now + life))
  if redis.call('PTTL', qkey) < life then
    redis.call('PEXPIRE', qkey, life)
  end
end

local function chunked(cmd, key, list)
  for i = 1, #list, 500 do
    redis.call(cmd, key, unpack(list, i, math.min(i + 499, #list)))
  end
end

-- save writes what changed, and makes the key expire with its latest hold
-- (or waiting writer's mark), or deletes it when nothing is live.
local function save(key, s, now)
  local until_ = math.max(last(s), s.wait)
  if until_ <= now then
    redis.call('DEL', key)
    return
  end
  if s.n > 0 then
    if s.mode ~= s.stored then
      s.hset[#s.hset + 1] = 'mode'
      s.hset[#s.hset + 1] = s.mode
    end
  elseif s.stored then
    s.hdel[#s.hdel + 1] = 'mode'
  end
  chunked('HDEL', key, s.hdel)
  chunked('HSET', key, s.hset)
  redis.call('PEXPIRE', key, until_ - now)
end
`

// acquireScript takes the lock, or enters it again, and issues fencing
// tokens.
//
// KEYS[1] lock, KEYS[2] fencing counter, KEYS[3] waiters' queue; ARGV[1]
// request ID, ARGV[2] TTL in whole milliseconds, ARGV[3] mode ("x" or "s"),
// ARGV[4] reentrant owner (empty when not reentrant), ARGV[5] how long a
// refused writer keeps new readers out, in milliseconds, ARGV[6] the
// waiting Driver's queue name (empty for a TryLock, a read lock, a
// reentrant lock, and RedLock), ARGV[7] its queue entry's lifetime in
// milliseconds, ARGV[8] how many tokens a new grant reserves (its block;
// see driver.TokenBlocker). Returns {1, token, again} when granted
// (again is 1 when the request joined a hold that was already there: a
// re-entry or a resend, 0 for a new grant), {0, ms, 0} when refused, ms
// being how long the holder's lease still runs (-1 for a stranger's key
// without expiry), at most a third of the queue entry's lifetime for a
// waiting Driver, or an error when the counter cannot be advanced exactly
// (and then nothing was written).
//
// Rules, in order:
//   - a hold with this request ID is granted again, with its token and a
//     new expiry: go-redis resends a command after a connection error, and
//     the first run may have succeeded with its reply lost; reporting
//     "locked" then would leave the lock behind, held by nobody;
//   - exclusive: granted when nobody holds the lock; entered again (same
//     token, a hold of its own) when it is held exclusively by the same
//     non-empty owner; otherwise refused. When readers are what keeps it
//     out, the writer also sets the wait mark, so that new readers queue
//     behind it (writer preference: a stream of readers cannot starve a
//     writer). The mark lasts ARGV[5] ms and each refused attempt renews
//     it; the refusal then reports at most a third of that, so that a
//     waiting writer comes back before its mark lapses. A writer's grant
//     clears the mark;
//   - shared: refused while a writer holds the lock; entered again (same
//     token) by an owner that already holds a read lock, even while a
//     writer waits (otherwise the writer would wait for that owner's
//     readers, and the owner's new entry for the writer); refused while a
//     writer's mark is live; otherwise granted;
//   - a free lock goes to a plain exclusive request only when the waiters'
//     queue is empty or the request's Driver is its head (and then leaves
//     the queue); a waiting Driver that is refused joins the queue, or
//     renews its entry, and is told to come back within a third of the
//     entry's lifetime, also when the refusal is a stranger's value at
//     the lock's name. Read locks and reentrant requests do not queue;
//   - each new grant (not a re-entry) gets the token max(counter+1, server
//     time in µs) and advances the counter to the end of its block
//     (token+ARGV[8]-1), so no other grant is issued a token of the block:
//     strictly increasing while Redis
//     keeps it, and still increasing after a restart that lost it, as long
//     as the server clock did not step back. Readers get tokens of their
//     own, each above every earlier writer's. Lua numbers are doubles,
//     exact below 2^53 (µs since 1970 are about 1.8e15), and the counter is
//     written with %.0f because Lua's tostring would round it to 14 digits.
//
// The common case comes first, with the least work (each redis.call costs
// the server about a microsecond): when neither the lock nor its queue
// exists, nobody holds or waits for the lock, so every rule above comes to
// a new grant, written at once.
var acquireScript = goredis.NewScript(prelude + `
if redis.call('EXISTS', KEYS[1], KEYS[3]) == 0 then
  local us, now = clock()
  local token, err = advance(KEYS[2], us, tonumber(ARGV[8] or '1'))
  if not token then return err end
  redis.call('HSET', KEYS[1], 'mode', ARGV[3],
    'h:' .. ARGV[1], holdValue(now + tonumber(ARGV[2]), token, ARGV[4]))
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, token, 0}
end
local us, now = clock()
local id, ttl, mode, owner = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local waiter, life = ARGV[6] or '', tonumber(ARGV[7] or '0')
local block = tonumber(ARGV[8] or '1')
local exp = now + ttl
-- refuse says no, queueing a waiting Driver, which then comes back before
-- its entry lapses.
local function refuse(ms)
  if waiter ~= '' then
    enqueue(KEYS[3], waiter, us, now, life)
    ms = math.min(ms, math.floor(life / 3))
  end
  return {0, math.max(ms, 1), 0}
end
local s = load(KEYS[1], now)
if not s then
  -- A stranger's value: refused with its PTTL. A waiting Driver is queued,
  -- or its entry renewed, as by any refusal, and comes back within a third
  -- of the entry's lifetime (also when the value has no expiry, PTTL -1),
  -- so that it keeps its place until the value goes.
  local pttl = redis.call('PTTL', KEYS[1])
  if waiter == '' then
    return {0, pttl, 0}
  end
  if pttl < 0 then pttl = life end
  return refuse(pttl)
end
local mine = s.holds[id]
if mine then
  put(s, id, exp, mine[2], mine[3])
  save(KEYS[1], s, now)
  return {1, mine[2], 1}
end
if s.n > 0 then
  if mode == 'x' then
    if s.mode == 'x' then
      local _, h = next(s.holds)
      if owner ~= '' and h[3] == owner then
        put(s, id, exp, h[2], owner)
        save(KEYS[1], s, now)
        return {1, h[2], 1}
      end
      return refuse(last(s) - now)
    end
    local window = tonumber(ARGV[5])
    if now + window > s.wait then
      setwait(s, now + window)
      save(KEYS[1], s, now)
    end
    return refuse(math.max(math.min(last(s) - now, math.floor(window / 3)), 1))
  end
  if s.mode == 'x' then
    return {0, last(s) - now, 0}
  end
  if owner ~= '' then
    for _, h in pairs(s.holds) do
      if h[3] == owner then
        put(s, id, exp, h[2], owner)
        save(KEYS[1], s, now)
        return {1, h[2], 1}
      end
    end
  end
end
if mode == 's' and s.wait > now then
  return {0, s.wait - now, 0}
end
if mode == 'x' and owner == '' then
  local head = qhead(KEYS[3], now)
  if head and head ~= waiter then
    return refuse(math.floor(life / 3))
  end
  if head then
    redis.call('HDEL', KEYS[3], waiter)
  end
end
local token, err = advance(KEYS[2], us, block)
if not token then return err end
s.mode = mode
if mode == 'x' and s.wait > 0 then
  s.wait = 0
  s.hdel[#s.hdel + 1] = 'wait'
end
put(s, id, exp, token, owner)
save(KEYS[1], s, now)
return {1, token, 0}
`)

// fenceScript raises the fencing counter to a token issued elsewhere, and
// gives this request's holds that token: RedLock's second phase (see
// redlock.go), which makes its tokens increase across masters.
//
// KEYS[1] lock, KEYS[2] fencing counter; ARGV[1] request ID, ARGV[2] the
// token, ARGV[3] the end of its block (the token when absent). The counter
// becomes max(counter, end of the block); the hold ARGV[1], and every other
// hold of the same non-empty owner (its other entries), get the token if
// theirs is lower. Returns 1, or an error when the counter holds no number
// (and then nothing was written).
var fenceScript = goredis.NewScript(prelude + `
local _, now = clock()
local token = tonumber(ARGV[2])
local top = tonumber(ARGV[3] or ARGV[2])
local prev = tonumber(redis.pcall('GET', KEYS[2]) or '0')
if prev == nil then
  return redis.error_reply('dlock: the fencing counter holds no number')
end
if prev < top then
  redis.call('SET', KEYS[2], string.format('%.0f', top))
end
local s = load(KEYS[1], now)
local mine = s and s.holds[ARGV[1]]
if mine then
  local changed = false
  for id, h in pairs(s.holds) do
    if h[2] < token and (id == ARGV[1] or (h[3] ~= '' and h[3] == mine[3])) then
      put(s, id, h[1], token, h[3])
      changed = true
    end
  end
  if changed then save(KEYS[1], s, now) end
end
return 1
`)

// extendScript pushes one hold's expiry out, if the hold is still there.
//
// KEYS[1] lock; ARGV[1] request ID, ARGV[2] TTL in whole milliseconds.
// Returns 1 when extended, 0 when the hold expired, was released, or the key
// belongs to a stranger (and then changes nothing).
var extendScript = goredis.NewScript(prelude + `
local _, now = clock()
local s = load(KEYS[1], now)
local h = s and s.holds[ARGV[1]]
if not h then
  return 0
end
put(s, ARGV[1], now + tonumber(ARGV[2]), h[2], h[3])
save(KEYS[1], s, now)
return 1
`)

// releaseScript removes one hold, if it is still there, and wakes the key's
// waiters when that frees the lock.
//
// KEYS[1] lock, KEYS[2] waiters' queue; ARGV[1] request ID, ARGV[2] the
// lock's channel, ARGV[3] the publishing command (PUBLISH, or SPUBLISH on a
// Cluster). The message is the queue's head, whose waiters alone wake, or
// empty when nobody is queued (every waiter wakes). Returns 1 when
// released, 0 when the hold expired, was released, or the key belongs to a
// stranger (and then changes nothing and publishes nothing). Publishing in
// the same script means a waiter can never be woken before the lock is
// actually free; a release that leaves other holds (readers, reentrant
// entries) publishes nothing, as nobody waiting could take the lock.
//
// The common case comes first: when the hash is this hold and its mode,
// and nothing else, the release deletes it without reading the clock. The
// hold is live: the key's expiry is its latest hold's, and Redis shows no
// expired key.
var releaseScript = goredis.NewScript(prelude + `
local raw = redis.pcall('HGETALL', KEYS[1])
if #raw == 4 then
  local f = {[raw[1]] = raw[2], [raw[3]] = raw[4]}
  local mode, mine = f['mode'], f['h:' .. ARGV[1]]
  if (mode == 'x' or mode == 's') and mine and string.match(mine, '^%d+ %d+ ') then
    redis.call('DEL', KEYS[1])
    local head = ''
    if redis.call('EXISTS', KEYS[2]) == 1 then
      local _, now = clock()
      head = qhead(KEYS[2], now) or ''
    end
    redis.call(ARGV[3], ARGV[2], head)
    return 1
  end
end
local _, now = clock()
local s = load(KEYS[1], now, raw)
if not (s and s.holds[ARGV[1]]) then
  return 0
end
drop(s, ARGV[1])
save(KEYS[1], s, now)
if s.n == 0 then
  redis.call(ARGV[3], ARGV[2], qhead(KEYS[2], now) or '')
end
return 1
`)

// transferScript hands an exclusive lock from one hold to a new request in
// one step: the lock is never free in between, so nobody is woken and
// nothing is published.
//
// KEYS[1] lock, KEYS[2] fencing counter; ARGV[1] the holder's request ID,
// ARGV[2] the new request ID, ARGV[3] its TTL in whole milliseconds, ARGV[4]
// how many tokens the grant reserves (as acquireScript's ARGV[8]).
// Returns {1, token} when handed over, {0, 0} when ARGV[1] holds nothing
// (expired, released, or a stranger's key: nothing changes), {2, 0} when
// ARGV[1] holds but not the whole lock alone (a read lock, a reentrant
// entry, other holds: nothing changes), or an error when the counter cannot
// be advanced exactly (nothing changes).
//
// A resend after a lost reply finds the hold already moved: when ARGV[1] is
// gone and ARGV[2] holds, the transfer happened, and its token is returned
// again, so that the caller does not mistake it for a lost lock.
var transferScript = goredis.NewScript(prelude + `
local us, now = clock()
local s = load(KEYS[1], now)
if not s then
  return {0, 0}
end
local from, to = ARGV[1], ARGV[2]
local h = s.holds[from]
if not h then
  local mine = s.holds[to]
  if mine and s.n == 1 and s.mode == 'x' and mine[3] == '' then
    return {1, mine[2]}
  end
  return {0, 0}
end
if s.mode ~= 'x' or s.n ~= 1 or h[3] ~= '' then
  return {2, 0}
end
local token, err = advance(KEYS[2], us, tonumber(ARGV[4] or '1'))
if not token then return err end
drop(s, from)
put(s, to, now + tonumber(ARGV[3]), token, '')
save(KEYS[1], s, now)
return {1, token}
`)

// leaveScript takes a Driver out of a lock's waiters' queue when its last
// waiter gave up. It is a script rather than a plain HDEL only so that the
// server counts it among the driver's requests (commandstats counts a
// script's own commands too, so only the scripts' calls measure requests).
//
// KEYS[1] waiters' queue; ARGV[1] the Driver's name in it.
var leaveScript = goredis.NewScript(`return redis.call('HDEL', KEYS[1], ARGV[1])`)

// inspectScript describes the lock without changing it.
//
// KEYS[1] lock, KEYS[2] fencing counter. Returns {kind, holders, holder,
// token, ms}: kind "free", "x", "s" or "other" (a stranger's key); holders
// the number of live holds; holder the reentrant owner, or the request ID,
// of the only (or an exclusive) holder, else ""; token the highest token of
// the live holds, or the counter when free; ms the time left on the latest
// hold (or the PTTL of a stranger's key).
var inspectScript = goredis.NewScript(prelude + `
local _, now = clock()
local s = load(KEYS[1], now)
local counter = tonumber(redis.pcall('GET', KEYS[2]) or '0') or 0
if not s then
  return {'other', 1, '', counter, redis.call('PTTL', KEYS[1])}
end
if s.n == 0 then
  return {'free', 0, '', counter, 0}
end
local holder, tok = '', 0
for id, h in pairs(s.holds) do
  if h[2] > tok then tok = h[2] end
  if h[3] ~= '' then holder = h[3] else holder = id end
end
if s.mode == 's' and s.n > 1 then holder = '' end
return {s.mode, s.n, holder, tok, last(s) - now}
`)

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
