-- redlock_requeue.lua: puts a RedLock waiter back in the queue as its
-- failed attempt is released. redlock_queue.go runs it between prelude.lua
-- and release.lua, as one script whose KEYS and ARGV are release.lua's and
-- three more arguments.
--
-- ARGV[4]  the waiting Driver's queue name
-- ARGV[5]  its queue entry's lifetime, in milliseconds
-- ARGV[6]  its ticket (see redlock_ticket.lua)
--
-- A master that granted the queue's head took it out of the queue. When
-- the head's attempt then fails (too few other masters granted it, their
-- releases not yet there), the release of that grant would otherwise name
-- the next waiter as the head on this master, and wake it, while the other
-- masters still name the failed head: two waiters would then split the
-- masters' votes. Writing the entry back first keeps the order, and the
-- release wakes the head itself, which tries again.

if ARGV[4] and ARGV[4] ~= '' then
  local _, now = clock()
  enqueue(KEYS[2], ARGV[4], tonumber(ARGV[6]), now, tonumber(ARGV[5]))
end
