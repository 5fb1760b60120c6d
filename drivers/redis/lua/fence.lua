-- fence.lua: raises the fencing counter to a token issued elsewhere, and
-- gives this request's holds that token: RedLock's second phase (see
-- redlock.go), which makes its tokens increase across masters. Runs after
-- prelude.lua.
--
-- KEYS[1]  the lock
-- KEYS[2]  the fencing counter
-- ARGV[1]  the request ID
-- ARGV[2]  the token
-- ARGV[3]  the end of its block (the token when absent)
--
-- The counter becomes max(counter, end of the block); the hold ARGV[1], and
-- every other hold of the same non-empty owner (its other entries), get the
-- token if theirs is lower; and the hold ARGV[1] is settled (its p: mark,
-- see prelude.lua, goes): from now on this master reports its value and
-- token to Inspect, which are then the lease's.
--
-- Reply: 1, or an error when the counter holds no number (and then nothing
-- was written).

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
  local changed = s.pend[ARGV[1]] == true
  setpending(s, ARGV[1], false)
  for id, h in pairs(s.holds) do
    if h[2] < token and (id == ARGV[1] or (h[3] ~= '' and h[3] == mine[3])) then
      put(s, id, h[1], token, h[3])
      changed = true
    end
  end
  if changed then save(KEYS[1], s, now) end
end
return 1
