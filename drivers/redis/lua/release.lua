-- release.lua: removes one hold, if it is still there, and wakes the key's
-- waiters when that frees the lock. Runs after prelude.lua.
--
-- KEYS[1]  the lock
-- KEYS[2]  the waiters' queue
-- ARGV[1]  the request ID
-- ARGV[2]  the lock's channel
-- ARGV[3]  the publishing command (PUBLISH, or SPUBLISH on a Cluster)
--
-- When a Driver is queued, the message goes to the queue's head alone: on
-- its personal channel, the lock's channel followed by ':' and its name
-- (which only that Driver subscribes to), with its name as the message, so
-- that a release costs the server one delivery and the other waiting
-- Drivers nothing (RedLock's waiters queue on each master and subscribe
-- their personal channels there too). When nobody is queued, it goes to the
-- lock's channel with an empty message, and every waiter wakes. Publishing
-- in the same script
-- means a waiter can never be woken before the lock is actually free; a
-- release that leaves other holds (readers, reentrant entries) publishes
-- nothing, as nobody waiting could take the lock.
--
-- Reply: 1 when released, 0 when the hold expired, was released, or the key
-- belongs to a stranger (and then nothing changes and nothing is
-- published).
--
-- The common case comes first: when the hash is this hold and its mode,
-- and nothing else but the hold's value and pending mark, the release
-- deletes it without reading the clock. The hold is live: the key's expiry
-- is its latest hold's, and Redis shows no expired key.

-- wake publishes the release for head, the queue's head or ''.
local function wake(head)
  if head ~= '' then
    redis.call(ARGV[3], ARGV[2] .. ':' .. head, head)
  else
    redis.call(ARGV[3], ARGV[2], '')
  end
end

-- alone reports whether raw holds only the fields of hold ARGV[1].
local function alone(raw)
  local own = {['mode'] = true, ['h:' .. ARGV[1]] = true, ['v:' .. ARGV[1]] = true, ['p:' .. ARGV[1]] = true}
  for i = 1, #raw, 2 do
    if not own[raw[i]] then return false end
  end
  return true
end

local raw = redis.pcall('HGETALL', KEYS[1])
if #raw >= 4 and #raw <= 8 and alone(raw) then
  local f = {}
  for i = 1, #raw, 2 do f[raw[i]] = raw[i + 1] end
  local mode, mine = f['mode'], f['h:' .. ARGV[1]]
  if (mode == 'x' or mode == 's') and mine and string.match(mine, '^%d+ %d+ ') then
    redis.call('DEL', KEYS[1])
    local head = ''
    if redis.call('EXISTS', KEYS[2]) == 1 then
      local _, now = clock()
      head = qhead(KEYS[2], now) or ''
    end
    wake(head)
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
  wake(qhead(KEYS[2], now) or '')
end
return 1
