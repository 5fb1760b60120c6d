-- prelude.lua: the Lua shared by the lock scripts, which scripts.go
-- prepends to each of them (all but leave.lua): reading the lock hash
-- (pruning expired holds) and saving what changed, the fencing counter,
-- and the waiters' queue. It only defines local functions.
--
-- Like every file here, it opens with a header, the comment lines it starts
-- with, which scripts.go strips: the server is sent the rest, as it is.
--
-- THE LOCK HASH
--
-- One lock is one hash, PREFIX{T}, whatever its mode: the plain exclusive
-- lock, the write lock and the read lock of a key are the same lock, so a
-- Mutex and an RWMutex on one key exclude each other. Its fields:
--
--   mode   "x" (exclusive: one holder, or the entries of one reentrant
--          owner) or "s" (shared: readers); absent when nobody holds it
--   h:ID   one per hold (a grant or a reentrant entry), ID being the
--          request ID: "EXPIRY TOKEN OWNER", EXPIRY in milliseconds of
--          the server's clock, TOKEN the fencing token of the grant, OWNER
--          the reentrant owner (possibly empty, and possibly containing
--          spaces: it is everything after the second space)
--   wait   set by a writer that readers keep out: the millisecond until
--          which new readers are refused (see acquire.lua)
--   v:ID   the hold's value (driver.Request.Value), absent when empty: a
--          leader election's candidate. A re-entry carries the value of the
--          hold it joins, so all the entries of one owner say the same
--   p:ID   "1" while the hold's grant is pending: RedLock's first phase
--          wrote it, and its second (fence.lua), which gives the hold the
--          token the lease will have, has not reached this master yet.
--          Never written on a single server or a Cluster
--
-- A v: or p: field whose hold is gone (expired, pruned) is pruned with it.
--
-- Every hold expires on its own: Redis 7.0 (Debian bookworm's) has no
-- per-field TTL, so the scripts compare each hold's EXPIRY with the server's
-- TIME, prune the holds that have passed, and set the key's own expiry to
-- the latest EXPIRY left (deleting the key when none is). A reader's lease is
-- therefore renewed and lost independently of every other reader's, and a
-- reentrant entry leaked by a crashed client ends by its own TTL even while
-- another entry of the same owner is renewed. Expired holds no script has
-- pruned yet are ignored by every script.
--
-- A key of another type, or a hash that does not parse as this layout (an
-- operator's value, or a lock written by an older version of this driver,
-- which used a plain string), is a lock held by a stranger: acquisitions are
-- refused with its PTTL, and extensions and releases change nothing. Older
-- versions read a hash the same way (their GET fails), so mixed versions
-- exclude each other during an upgrade; both advance the same fencing
-- counter.
--
-- The waiters' queue, at a key of its own, is described below, above qhead.

local function clock()
  local t = redis.call('TIME')
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  return us, math.floor(us / 1000)
end

-- load returns the live state of the lock at key, or nil when key holds
-- something that is not a lock of this layout. raw is the key's HGETALL
-- reply when the caller has read it already.
local function load(key, now, raw)
  local s = {holds = {}, n = 0, wait = 0, vals = {}, pend = {}, hset = {}, hdel = {}}
  -- One command: a missing key reads as an empty hash, and a key of
  -- another type fails (WRONGTYPE), which pcall turns into a table.
  raw = raw or redis.pcall('HGETALL', key)
  if raw.err then return nil end
  local mode, wait
  local extra = {} -- the v: and p: fields, kept only beside a live hold
  for i = 1, #raw, 2 do
    local f, v = raw[i], raw[i + 1]
    local tag = string.sub(f, 1, 2)
    if tag == 'v:' or tag == 'p:' then
      extra[#extra + 1] = f
      extra[#extra + 1] = v
    elseif f == 'mode' then
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
  for i = 1, #extra, 2 do
    local f, id = extra[i], string.sub(extra[i], 3)
    if not s.holds[id] then
      s.hdel[#s.hdel + 1] = f
    elseif string.sub(f, 1, 2) == 'v:' then
      s.vals[id] = extra[i + 1]
    else
      s.pend[id] = true
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

-- setvalue stores v as hold id's value (v: field), or removes it when v
-- is empty.
local function setvalue(s, id, v)
  if v ~= '' then
    s.vals[id] = v
    s.hset[#s.hset + 1] = 'v:' .. id
    s.hset[#s.hset + 1] = v
  elseif s.vals[id] then
    s.vals[id] = nil
    s.hdel[#s.hdel + 1] = 'v:' .. id
  end
end

-- setpending marks hold id's grant pending (p: field), or settled.
local function setpending(s, id, pending)
  if pending then
    s.pend[id] = true
    s.hset[#s.hset + 1] = 'p:' .. id
    s.hset[#s.hset + 1] = '1'
  elseif s.pend[id] then
    s.pend[id] = nil
    s.hdel[#s.hdel + 1] = 'p:' .. id
  end
end

-- drop removes hold id with its value and pending mark.
local function drop(s, id)
  s.holds[id] = nil
  s.n = s.n - 1
  s.hdel[#s.hdel + 1] = 'h:' .. id
  setvalue(s, id, '')
  setpending(s, id, false)
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
--
-- Beside a Driver's entry, a field "g:NAME" (a Driver's name never holds
-- ':') may say that the release may grant the lock to that Driver itself:
-- "ID TTL BLOCK ASEQ", the request ID of the Driver's latest queued
-- attempt, its TTL in ms, its token block, and ASEQ, the number the Driver
-- gave that attempt. Each queued attempt rewrites it, or deletes it when
-- the attempt may not be granted so (a value, replica acknowledgements).
-- release.lua then writes the head's hold for ID, as acquire.lua's grant
-- would, and sends ID, token, TTL and ASEQ in the head's message (see
-- release.lua and grants.go). Versions that know no g: field delete it
-- (it does not parse as an entry), so they never leave a grant to a
-- Driver that could not claim it; a Driver without one is only woken.

-- The queue's order, cached. A full reading of the queue (HGETALL, and a
-- pattern match per entry) costs the server about 2 µs per waiting Driver,
-- and a release reads it to find the head, on the path from one holder to
-- the next. So a full reading also writes the field "q:" (no Driver's name
-- holds ':') with the first live entries in order, at most qcache of them,
-- each as NAME@SEQ, separated by spaces; later readings take the first of
-- them whose entry is still live with that SEQ, and read everything again
-- only when none is. The queue's order is by SEQ, then by name (so that
-- every master of a RedLock orders equal tickets alike).
--
-- That is the head because of what the cache keeps true (its invariant):
-- every live entry either is named in it with its SEQ, or comes after the
-- last one named. A full reading makes it true. An entry that stays live
-- keeps its SEQ (enqueue renews it in place), so only enqueue writing a
-- pair the cache does not name (a new entry, a lapsed one renewed, a name
-- back with another SEQ) can break it, and enqueue then drops "q:" unless
-- the pair comes after the last one named. On one server a new SEQ is the
-- server's clock, later than every one cached, so the cache survives; a
-- RedLock's SEQs are its waiters' tickets, which may reach a master in any
-- order, and one that would go before a cached name empties the cache
-- there, so the next reading is a full one. Names are only ever dropped
-- from the cache's front while they are not live with their SEQ. So the
-- first live cached pair is the least live entry, as a full reading finds
-- it, and every master that holds the same entries names the same head,
-- with or without a cache. The cache only chooses which waiter is the
-- head: a lock is granted, by a release or an acquisition, only when it is
-- free, as before. Versions that know no "q:" field delete it (it does not
-- parse as an entry) at their next full reading; a cache without "@" (the
-- first version of the cache, which named no SEQs and could name a later
-- waiter as the head under RedLock) names nothing and is read again.
local qcache = 16

-- qentry parses a queue entry's value, "SEQ EXPIRY", into two numbers, or
-- returns nil.
local function qentry(v)
  local seq, exp = string.match(v, '^(%d+) (%d+)$')
  if not seq then return nil end
  return tonumber(seq), tonumber(exp)
end

-- qbefore reports whether the entry (seq1, name1) goes before (seq2,
-- name2) in the queue's order.
local function qbefore(seq1, name1, seq2, name2)
  if seq1 ~= seq2 then return seq1 < seq2 end
  return name1 < name2
end

-- qlive returns the expiry of name's entry in the queue when it is live
-- with the SEQ seq.
local function qlive(qkey, name, seq, now)
  local v = redis.call('HGET', qkey, name)
  if not v then return nil end
  local s, exp = qentry(v)
  if s ~= seq or exp <= now then return nil end
  return exp
end

-- qscan reads the whole queue: it deletes lapsed entries (and g: fields
-- whose entry is gone), writes the cached order, and returns the head as
-- qhead does.
local function qscan(qkey, now)
  local raw = redis.pcall('HGETALL', qkey)
  if raw.err then return nil end
  local live, g, order = {}, {}, {}
  for i = 1, #raw, 2 do
    local f = raw[i]
    local tag = string.sub(f, 1, 2)
    if tag == 'g:' then
      g[string.sub(f, 3)] = raw[i + 1]
    elseif tag ~= 'q:' then
      -- qentry, inline, keeping SEQ's digits for the cache too
      local digits, exp = string.match(raw[i + 1], '^(%d+) (%d+)$')
      exp = tonumber(exp)
      if not digits or exp <= now then
        redis.call('HDEL', qkey, f)
      else
        live[f] = exp
        order[#order + 1] = {tonumber(digits), f, digits}
      end
    end
  end
  for name in pairs(g) do
    if not live[name] then redis.call('HDEL', qkey, 'g:' .. name) end
  end
  if #order == 0 then
    redis.call('HDEL', qkey, 'q:')
    return nil
  end
  -- qbefore, inline: the sort calls it about 6 times per entry.
  table.sort(order, function(a, b)
    if a[1] ~= b[1] then return a[1] < b[1] end
    return a[2] < b[2]
  end)
  local names = {}
  for i = 1, math.min(#order, qcache) do
    names[i] = order[i][2] .. '@' .. order[i][3]
  end
  redis.call('HSET', qkey, 'q:', table.concat(names, ' '))
  local head = order[1][2]
  return head, g[head], live[head]
end

-- qhead returns the queue's head, or nil; and, for the head, its g: field
-- or nil, and its entry's expiry. It takes the head from the cached order
-- when one of its pairs is live (dropping the pairs before it), and reads
-- the whole queue otherwise.
local function qhead(qkey, now)
  local cached = redis.pcall('HGET', qkey, 'q:')
  if type(cached) == 'string' then
    for at, pair in string.gmatch(cached, '()(%S+)') do
      local name, seq = string.match(pair, '^(.+)@(%d+)$')
      local exp = name and qlive(qkey, name, tonumber(seq), now)
      if exp then
        if at > 1 then
          redis.call('HSET', qkey, 'q:', string.sub(cached, at))
        end
        local gi = redis.call('HGET', qkey, 'g:' .. name)
        return name, gi or nil, exp
      end
    end
  end
  return qscan(qkey, now)
end

-- qadmit keeps the cached order's invariant (see above) as enqueue writes
-- name's entry with seq when it was not live with it: the cache stays when
-- it names the pair, or when the pair comes after the last one it names,
-- and is dropped otherwise.
local function qadmit(qkey, name, seq)
  local cached = redis.call('HGET', qkey, 'q:')
  if not cached then return end
  -- The last pair, from the end (a pattern anchored there would be tried
  -- at every position), then the pair itself, by a plain search: both in C.
  local last = string.reverse(string.match(string.reverse(cached), '^%S+') or '')
  local lname, lseq = string.match(last, '^(.+)@(%d+)$')
  if lname and qbefore(tonumber(lseq), lname, tonumber(seq), name) then return end
  if string.find(' ' .. cached .. ' ', ' ' .. name .. '@' .. seq .. ' ', 1, true) then return end
  redis.call('HDEL', qkey, 'q:')
end

-- qdel takes name out of the queue, with its g: field, and the cached
-- order too when nothing else is left, so that an empty queue leaves no
-- key behind.
local function qdel(qkey, name)
  redis.call('HDEL', qkey, name, 'g:' .. name)
  if redis.call('HLEN', qkey) == 1 and redis.call('HEXISTS', qkey, 'q:') == 1 then
    redis.call('DEL', qkey)
  end
end

-- enqueue adds waiter at the queue's tail, or renews its entry in place.
-- gi is the attempt's g: field (see above): a string writes it, false
-- deletes it, nil leaves the field as it is (RedLock, which has none).
-- A waiter's entry keeps its SEQ as long as it is there, live or lapsed;
-- us is the SEQ of a new one (RedLock's ticket, or the server's clock).
local function enqueue(qkey, waiter, us, now, life, gi)
  local cur = redis.call('HGET', qkey, waiter)
  local cseq, cexp
  if cur then cseq, cexp = qentry(cur) end
  local seq = cseq and string.format('%.0f', cseq) or string.format('%.0f', us)
  if not (cseq and cexp > now) then
    qadmit(qkey, waiter, seq)
  end
  redis.call('HSET', qkey, waiter, seq .. ' ' .. string.format('%.0f', now + life))
  if gi then
    redis.call('HSET', qkey, 'g:' .. waiter, gi)
  elseif gi == false then
    redis.call('HDEL', qkey, 'g:' .. waiter)
  end
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
