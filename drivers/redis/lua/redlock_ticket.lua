-- redlock_ticket.lua: RedLock's place in the waiters' queue. scripts.go
-- does not send it alone: redlock_queue.go runs it between prelude.lua and
-- acquire.lua, as one script whose KEYS and ARGV are acquire.lua's and
-- one more argument.
--
-- ARGV[11] the waiting Driver's ticket: its clock in µs when it first
--          waited for the lock, the same on every master
--
-- A single server orders its queue by its own clock at each waiter's first
-- refusal. Five masters doing so would each order the same waiters
-- differently, and each grant a free lock to a different head: no head
-- would reach a majority. So a RedLock waiter brings its queue position
-- with it: when it has no entry on this master (its first attempt here, or
-- its entry lapsed, or a grant that did not make a majority took it out),
-- this writes one with the ticket as its SEQ; acquire.lua then finds it
-- and keeps its SEQ when it renews it. Every master that knows a set of
-- waiters therefore names the same head. A waiter that is not waiting
-- (ARGV[6] empty) changes nothing.

if ARGV[6] ~= '' and ARGV[11] then
  local _, now = clock()
  enqueue(KEYS[3], ARGV[6], tonumber(ARGV[11]), now, tonumber(ARGV[7]))
end
