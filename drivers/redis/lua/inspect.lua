-- inspect.lua: describes the lock without changing it. Runs after
-- prelude.lua.
--
-- KEYS[1]  the lock
-- KEYS[2]  the fencing counter
--
-- Reply: {kind, holders, holder, token, ms}:
--   kind     "free", "x", "s" or "other" (a stranger's key)
--   holders  the number of live holds
--   holder   the reentrant owner, or the request ID, of the only (or an
--            exclusive) holder, else ""
--   token    the highest token of the live holds, or the counter when free
--   ms       the time left on the latest hold (or the PTTL of a stranger's
--            key)

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
