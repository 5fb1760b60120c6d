-- release.lua: removes one hold, if it is still there, and wakes the key's
-- waiters when that frees the lock. Runs after prelude.lua.
--
-- KEYS[1]  the lock
-- KEYS[2]  the waiters' queue
-- KEYS[3]  the fencing counter (absent on RedLock, whose queue entries
--          never allow a grant by release)
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
-- Grant by release. When the lock comes free and the queue's head has a g:
-- field (its last queued attempt allowed it: a plain exclusive wait, no
-- value, no replica acknowledgements; see prelude.lua), the release grants
-- the lock to that attempt's request ID exactly as acquire.lua's new grant
-- would (a token from the counter, which moves past the attempt's block;
-- mode "x"; no owner, no value; the wait mark cleared), takes the head out
-- of the queue, and publishes on its personal channel "NAME ID TOKEN TTL
-- ASEQ": the hold's TTL in ms and the attempt's number. The hold expires
-- when the head's queue entry would have (at most the attempt's TTL from
-- now): a head that has gone holds the lock idle no longer than its entry
-- would have held the queue up. The waiting Driver claims the grant from
-- the message (grants.go), once, counting its validity from when it sent
-- attempt ASEQ, which the server processed before this grant. A message
-- with only the name wakes the head, which acquires by request; older
-- Drivers write no g: field, so they are only ever woken.
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

-- handoff runs once the lock is free: s is its state (nil when its key
-- was deleted, and then nothing else is in it). It grants the lock to the
-- queue's head when its g: field allows (see "Grant by release"), or wakes
-- the head (or everyone); and saves s either way.
local function handoff(s, us, now)
  local head, gi, hexp = qhead(KEYS[2], now)
  if head and gi and KEYS[3] then
    local id, ttl, block, aseq = string.match(gi, '^(%S+) (%d+) (%d+) (%d+)$')
    local exp = id and math.min(now + tonumber(ttl), hexp)
    if exp and exp > now then
      local token = advance(KEYS[3], us, tonumber(block))
      if token then
        qdel(KEYS[2], head)
        s = s or load(KEYS[1], now, {})
        s.mode = 'x'
        if s.wait > 0 then
          s.wait = 0
          s.hdel[#s.hdel + 1] = 'wait'
        end
        put(s, id, exp, token, '')
        save(KEYS[1], s, now)
        redis.call(ARGV[3], ARGV[2] .. ':' .. head, string.format('%s %s %.0f %.0f %s', head, id, token, exp - now, aseq))
        return
      end
      -- A counter that cannot advance: the head's own request fails loudly.
    end
  end
  if s then save(KEYS[1], s, now) end
  wake(head or '')
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
    if redis.call('EXISTS', KEYS[2]) == 1 then
      local us, now = clock()
      handoff(nil, us, now)
    else
      wake('')
    end
    return 1
  end
end
local us, now = clock()
local s = load(KEYS[1], now, raw)
if not (s and s.holds[ARGV[1]]) then
  return 0
end
drop(s, ARGV[1])
if s.n == 0 then
  handoff(s, us, now)
else
  save(KEYS[1], s, now)
end
return 1
