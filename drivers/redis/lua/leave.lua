-- leave.lua: takes a Driver out of a lock's waiters' queue when its last
-- waiter gave up. It is a script rather than a plain HDEL only so that the
-- server counts it among the driver's requests (commandstats counts a
-- script's own commands too, so only the scripts' calls measure requests).
-- It runs alone, without prelude.lua.
--
-- KEYS[1]  the waiters' queue
-- ARGV[1]  the Driver's name in it
--
-- It removes the Driver's g: field too (see prelude.lua), so that no
-- release grants the lock to an attempt of a Driver that left.
--
-- When only the cached order ("q:", see prelude.lua) is left, it goes too,
-- so that an empty queue leaves no key behind.
--
-- Reply: how many of the two fields were there (HDEL's reply).
local n = redis.call('HDEL', KEYS[1], ARGV[1], 'g:' .. ARGV[1])
if redis.call('HLEN', KEYS[1]) == 1 and redis.call('HEXISTS', KEYS[1], 'q:') == 1 then
  redis.call('DEL', KEYS[1])
end
return n