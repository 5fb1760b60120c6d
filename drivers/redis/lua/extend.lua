-- extend.lua: pushes one hold's expiry out, if the hold is still there.
-- Runs after prelude.lua.
--
-- KEYS[1]  the lock
-- ARGV[1]  the request ID
-- ARGV[2]  the TTL, in whole milliseconds
--
-- Reply: 1 when extended, 0 when the hold expired, was released, or the key
-- belongs to a stranger (and then nothing changes).

local _, now = clock()
local s = load(KEYS[1], now)
local h = s and s.holds[ARGV[1]]
if not h then
  return 0
end
put(s, ARGV[1], now + tonumber(ARGV[2]), h[2], h[3])
save(KEYS[1], s, now)
return 1
