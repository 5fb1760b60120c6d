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

-- qhead returns the queue's head, deleting lapsed entries (and g: fields
-- whose entry is gone), or nil; and, for the head, its g: field or nil,
-- and its entry's expiry.
local function qhead(qkey, now)
  local raw = redis.pcall('HGETALL', qkey)
  if raw.err then return nil end
  local head, hseq, hexp
  local live, g = {}, {}
  for i = 1, #raw, 2 do
    if string.sub(raw[i], 1, 2) == 'g:' then
      g[string.sub(raw[i], 3)] = raw[i + 1]
    else
      local seq, exp = string.match(raw[i + 1], '^(%d+) (%d+)$')
      seq, exp = tonumber(seq), tonumber(exp)
      if not seq or exp <= now then
        redis.call('HDEL', qkey, raw[i])
      else
        live[raw[i]] = true
        if not head or seq < hseq then
          head, hseq, hexp = raw[i], seq, exp
        end
      end
    end
  end
  for name in pairs(g) do
    if not live[name] then redis.call('HDEL', qkey, 'g:' .. name) end
  end
  return head, head and g[head], hexp
end

-- enqueue adds waiter at the queue's tail, or renews its entry in place.
-- gi is the attempt's g: field (see above): a string writes it, false
-- deletes it, nil leaves the field as it is (RedLock, which has none).
local function enqueue(qkey, waiter, us, now, life, gi)
  local cur = redis.call('HGET', qkey, waiter)
  local seq = cur and string.match(cur, '^(%d+) ') or string.format('%.0f', us)
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
