-- inspect.lua: describes the lock without changing it. Runs after
-- prelude.lua.
--
-- KEYS[1]  the lock
-- KEYS[2]  the fencing counter
--
-- Reply: {kind, holders, holder, token, ms, value, settled}:
--   kind     "free", "x", "s" or "other" (a stranger's key)
--   holders  the number of live holds described
--   holder   the reentrant owner, or the request ID, of the only (or an
--            exclusive) holder described, else ""
--   token    the highest token of the holds described, or the counter
--            when free
--   ms       the time left on the latest hold (or the PTTL of a stranger's
--            key)
--   value    the value of the hold with that token when exclusive (see
--            prelude.lua's v:), else ""
--   settled  1 when the holds described are settled, 0 when every hold is
--            pending (RedLock's first phase, prelude.lua's p:)
--
-- The holds described are the settled ones, or every hold when none is
-- settled: so the value and the token come from one hold, read in one
-- script, and, while any hold is settled, from a settled one, whose token
-- is its lease's. On a single server or a Cluster every hold is settled.
-- Of holds with the same token (the entries of one reentrant owner, which
-- carry one value), the one with the least ID is taken, so that every
-- master names the same.

local _, now = clock()
local s = load(KEYS[1], now)
local counter = tonumber(redis.pcall('GET', KEYS[2]) or '0') or 0
if not s then
  return {'other', 1, '', counter, redis.call('PTTL', KEYS[1]), '', 1}
end
if s.n == 0 then
  return {'free', 0, '', counter, 0, '', 1}
end
local settled = 0
for id in pairs(s.holds) do
  if not s.pend[id] then settled = settled + 1 end
end
local count, tok, best = 0, 0, nil
for id, h in pairs(s.holds) do
  if settled == 0 or not s.pend[id] then
    count = count + 1
    if not best or h[2] > tok or (h[2] == tok and id < best) then
      tok, best = h[2], id
    end
  end
end
local holder, value = best, ''
if s.holds[best][3] ~= '' then holder = s.holds[best][3] end
if s.mode == 's' and count > 1 then holder = '' end
if s.mode == 'x' then value = s.vals[best] or '' end
return {s.mode, count, holder, tok, last(s) - now, value, settled > 0 and 1 or 0}
