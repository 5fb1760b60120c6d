-- anyacquire.lua: takes the first free lock among several (AcquireAny), in
-- one script. Runs after prelude.lua and after acquire.lua's body, which
-- scripts.go wraps as the local function acquireOne(KEYS, ARGV): each
-- request is tried with the very code of acquire.lua, so a permit taken
-- here is the lock, the hold, the token and the queue check of a plain
-- Acquire, and the two cannot drift apart.
--
-- For request i (1-based), in the order given:
-- KEYS[3i-2]  its lock            (acquire.lua's KEYS[1])
-- KEYS[3i-1]  its fencing counter (KEYS[2])
-- KEYS[3i]    its waiters' queue  (KEYS[3])
-- ARGV[10i-9] .. ARGV[10i]  its acquire.lua ARGV[1] .. ARGV[10]
--
-- Reply: {1, token, again, i} for the request granted, as acquire.lua's
-- grant, i being its position: no later request is tried; {0, ms, 0, 0}
-- when every request was refused, ms the soonest of the refusals' positive
-- waits (0 when none told one); or acquire.lua's error for request i, the
-- earlier ones having been refused.
--
-- Rules:
--   - a hold with one of the requests' IDs is granted again first, as
--     acquire.lua grants it: go-redis resends a command after a connection
--     error, and when the first run granted request i with its reply lost,
--     a request ahead of i may have come free since; granting that one
--     would leave request i's hold behind, held by nobody. The search costs
--     a command per request;
--   - otherwise the requests are tried in order, each exactly as
--     acquire.lua would, up to the first grant. A refusal writes only what
--     acquire.lua's refusal writes (a writer's wait mark when readers hold
--     the lock), so a call that grants nothing leaves the locks as that
--     many refused Acquires would.

local n = #KEYS / 3
local function try(i)
  return acquireOne({KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]}, {unpack(ARGV, 10 * i - 9, 10 * i)})
end
for i = 1, n do
  -- pcall: a stranger's value of another type is no hold of ours.
  if redis.pcall('HEXISTS', KEYS[3 * i - 2], 'h:' .. ARGV[10 * i - 9]) == 1 then
    local r = try(i)
    if r.err then return r end
    if r[1] == 1 then return {1, r[2], r[3], i} end
    break -- the hold had expired: nothing of ours to find again
  end
end
local soonest = 0
for i = 1, n do
  local r = try(i)
  if r.err then return r end
  if r[1] == 1 then return {1, r[2], r[3], i} end
  if r[2] > 0 and (soonest == 0 or r[2] < soonest) then soonest = r[2] end
end
return {0, soonest, 0, 0}
