-- transfer.lua: hands an exclusive lock from one hold to a new request in
-- one step: the lock is never free in between, so nobody is woken and
-- nothing is published. Runs after prelude.lua.
--
-- KEYS[1]  the lock
-- KEYS[2]  the fencing counter
-- ARGV[1]  the holder's request ID
-- ARGV[2]  the new request ID
-- ARGV[3]  its TTL, in whole milliseconds
-- ARGV[4]  how many tokens the grant reserves (as acquire.lua's ARGV[8])
-- ARGV[5]  the new request's value (may be empty): it replaces the old
--          hold's, which goes with that hold
--
-- Reply: {1, token} when handed over; {0, 0} when ARGV[1] holds nothing
-- (expired, released, or a stranger's key: nothing changes); {2, 0} when
-- ARGV[1] holds but not the whole lock alone (a read lock, a reentrant
-- entry, other holds: nothing changes); or an error when the counter
-- cannot be advanced exactly (nothing changes).
--
-- A resend after a lost reply finds the hold already moved: when ARGV[1] is
-- gone and ARGV[2] holds, the transfer happened, and its token is returned
-- again, so that the caller does not mistake it for a lost lock.

local us, now = clock()
local s = load(KEYS[1], now)
if not s then
  return {0, 0}
end
local from, to = ARGV[1], ARGV[2]
local h = s.holds[from]
if not h then
  local mine = s.holds[to]
  if mine and s.n == 1 and s.mode == 'x' and mine[3] == '' then
    return {1, mine[2]}
  end
  return {0, 0}
end
if s.mode ~= 'x' or s.n ~= 1 or h[3] ~= '' then
  return {2, 0}
end
local token, err = advance(KEYS[2], us, tonumber(ARGV[4] or '1'))
if not token then return err end
drop(s, from)
put(s, to, now + tonumber(ARGV[3]), token, '')
setvalue(s, to, ARGV[5] or '')
save(KEYS[1], s, now)
return {1, token}
