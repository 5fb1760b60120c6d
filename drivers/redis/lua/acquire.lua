-- acquire.lua: takes the lock, or enters it again, and issues fencing
-- tokens. Runs after prelude.lua.
--
-- KEYS[1]  the lock
-- KEYS[2]  the fencing counter
-- KEYS[3]  the waiters' queue
-- ARGV[1]  the request ID
-- ARGV[2]  the TTL, in whole milliseconds
-- ARGV[3]  the mode, "x" or "s"
-- ARGV[4]  the reentrant owner (empty when not reentrant)
-- ARGV[5]  how long a refused writer keeps new readers out, in milliseconds
-- ARGV[6]  the waiting Driver's queue name (empty for a TryLock, a read
--          lock, a reentrant lock, and RedLock)
-- ARGV[7]  its queue entry's lifetime, in milliseconds
-- ARGV[8]  how many tokens a new grant reserves (its block; see
--          driver.Capabilities.TokenBlock)
-- ARGV[9]  the request's value (driver.Request.Value; may be empty)
-- ARGV[10] "1" when the grant is pending until fence.lua settles it
--          (RedLock's first phase), else empty
-- ARGV[11] unused here (RedLock's ticket: redlock_ticket.lua)
-- ARGV[12] absent (RedLock, AcquireAny: the waiter's g: field is left as
--          it is), empty (a queued refusal deletes it: the release only
--          wakes this Driver), or "TTL BLOCK ASEQ": a queued refusal
--          writes "ID TTL BLOCK ASEQ" as the Driver's g: field, so that a
--          release may grant this request the lock (see prelude.lua,
--          release.lua)
-- ARGV[13] absent or empty, or the ID of an earlier attempt of this
--          waiting Driver that a release may have granted the lock to, and
--          that the Driver will never claim (see "Take-over" below)
--
-- Reply: {1, token, again} when granted (again is 1 when the request joined
-- a hold that was already there: a re-entry or a resend, 0 for a new
-- grant); {0, ms, 0} when refused, ms being how long the holder's lease
-- still runs (-1 for a stranger's key without expiry), at most a third of
-- the queue entry's lifetime for a waiting Driver; or an error when the
-- counter cannot be advanced exactly (and then nothing was written).
--
-- Rules, in order:
--   - a hold with this request ID is granted again, with its token, value
--     and pending mark and a new expiry: go-redis resends a command after a
--     connection error, and the first run may have succeeded with its reply
--     lost; reporting "locked" then would leave the lock behind, held by
--     nobody;
--   - a new grant stores the request's value beside the hold, and a
--     re-entry the value of the hold it joins (as it takes its token); both
--     are marked pending when ARGV[10] says so;
--   - exclusive: granted when nobody holds the lock; entered again (same
--     token, a hold of its own) when it is held exclusively by the same
--     non-empty owner; otherwise refused. When readers are what keeps it
--     out, the writer also sets the wait mark, so that new readers queue
--     behind it (writer preference: a stream of readers cannot starve a
--     writer). The mark lasts ARGV[5] ms and each refused attempt renews
--     it; the refusal then reports at most a third of that, so that a
--     waiting writer comes back before its mark lapses. A writer's grant
--     clears the mark;
--   - shared: refused while a writer holds the lock; entered again (same
--     token) by an owner that already holds a read lock, even while a
--     writer waits (otherwise the writer would wait for that owner's
--     readers, and the owner's new entry for the writer); refused while a
--     writer's mark is live; otherwise granted;
--   - a free lock goes to a plain exclusive request only when the waiters'
--     queue is empty or the request's Driver is its head (and then leaves
--     the queue); a waiting Driver that is refused joins the queue, or
--     renews its entry, and is told to come back within a third of the
--     entry's lifetime, also when the refusal is a stranger's value at
--     the lock's name. Read locks and reentrant requests do not queue;
--   - each new grant (not a re-entry) gets the token max(counter+1, server
--     time in µs) and advances the counter to the end of its block
--     (token+ARGV[8]-1), so no other grant is issued a token of the block:
--     strictly increasing while Redis keeps it, and still increasing after
--     a restart that lost it, as long as the server clock did not step
--     back. Readers get tokens of their own, each above every earlier
--     writer's. Lua numbers are doubles, exact below 2^53 (µs since 1970
--     are about 1.8e15), and the counter is written with %.0f because
--     Lua's tostring would round it to 14 digits.
--
-- Take-over. A release that grants the lock to the queue's head (release.lua)
-- writes a hold for the head's last queued request ID, and tells it in a
-- message. When the message is lost, or came too late for the Driver to
-- count enough validity from it, the Driver asks again with a new request,
-- naming the earlier ID in ARGV[13]; if that ID holds the lock alone, this
-- request takes its place: the hold is dropped and the request granted
-- whatever the queue says (the grant was this Driver's turn), with a new
-- token and expiry. This is safe because of what the Driver promises about
-- ARGV[13]: it names only an ID whose grant it has not claimed, and marks
-- the ID unclaimable before sending (grants.go), so no lease of it exists
-- or will: dropping it takes the lock from nobody. And only this Driver
-- knows the ID (128 random bits of its own attempt, refused), so a hold
-- with it can only be the release's grant to it.
--
-- The common case comes first, with the least work (each redis.call costs
-- the server about a microsecond): when neither the lock nor its queue
-- exists, nobody holds or waits for the lock, so every rule above comes to
-- a new grant, written at once.

if redis.call('EXISTS', KEYS[1], KEYS[3]) == 0 then
  local us, now = clock()
  local token, err = advance(KEYS[2], us, tonumber(ARGV[8] or '1'))
  if not token then return err end
  local fields = {'mode', ARGV[3], 'h:' .. ARGV[1], holdValue(now + tonumber(ARGV[2]), token, ARGV[4])}
  if (ARGV[9] or '') ~= '' then
    fields[#fields + 1] = 'v:' .. ARGV[1]
    fields[#fields + 1] = ARGV[9]
  end
  if ARGV[10] == '1' then
    fields[#fields + 1] = 'p:' .. ARGV[1]
    fields[#fields + 1] = '1'
  end
  redis.call('HSET', KEYS[1], unpack(fields))
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, token, 0}
end
local us, now = clock()
local id, ttl, mode, owner = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local waiter, life = ARGV[6] or '', tonumber(ARGV[7] or '0')
local block = tonumber(ARGV[8] or '1')
local value, pending = ARGV[9] or '', ARGV[10] == '1'
-- gi: this attempt's g: field for enqueue (see ARGV[12])
local gi = nil
if ARGV[12] then
  gi = ARGV[12] ~= '' and (id .. ' ' .. ARGV[12])
end
local takeover = ARGV[13] or ''
local exp = now + ttl
-- refuse says no, queueing a waiting Driver, which then comes back before
-- its entry lapses.
local function refuse(ms)
  if waiter ~= '' then
    enqueue(KEYS[3], waiter, us, now, life, gi)
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
-- enter adds a re-entry of the hold hid (h) for this request.
local function enter(hid, h)
  put(s, id, exp, h[2], owner)
  setvalue(s, id, s.vals[hid] or '')
  setpending(s, id, pending)
  save(KEYS[1], s, now)
  return {1, h[2], 1}
end
local mine = s.holds[id]
if mine then
  put(s, id, exp, mine[2], mine[3])
  save(KEYS[1], s, now)
  return {1, mine[2], 1}
end
local taken = false
if waiter ~= '' and takeover ~= '' and mode == 'x' and owner == '' then
  local h = s.holds[takeover]
  if h and s.n == 1 and s.mode == 'x' and h[3] == '' then
    drop(s, takeover) -- see "Take-over" above
    taken = true
  end
end
if s.n > 0 then
  if mode == 'x' then
    if s.mode == 'x' then
      local hid, h = next(s.holds)
      if owner ~= '' and h[3] == owner then
        return enter(hid, h)
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
    for hid, h in pairs(s.holds) do
      if h[3] == owner then
        return enter(hid, h)
      end
    end
  end
end
if mode == 's' and s.wait > now then
  return {0, s.wait - now, 0}
end
if mode == 'x' and owner == '' and not taken then
  local head = qhead(KEYS[3], now)
  if head and head ~= waiter then
    return refuse(math.floor(life / 3))
  end
  if head then
    qdel(KEYS[3], waiter)
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
setvalue(s, id, value)
setpending(s, id, pending)
save(KEYS[1], s, now)
return {1, token, 0}
