-- leave: a waiter that gives up drops its ticket, and the permit a
-- release handed it unheard, if any: it goes on to the next waiter.
--
-- KEYS[1]  the name's hash (see state.lua)
-- ARGV[1]  owner
--
-- Replies 1 when there was a ticket or a permit to give up, else 0. A head
-- that leaves may have been holding up those behind it (see serve()).
local gave = 0
local v = redis.call('HGET', S, ARGV[1])
if v then
  drop(ARGV[1], v)
  gave = 1
end
if redis.call('ZREM', Q, ARGV[1]) == 1 then
  redis.call('HDEL', QX, ARGV[1])
  gave = 1
end
if gave == 1 then
  prune()
  if redis.call('EXISTS', Q) == 1 then serve(nil) end
end
return gave
