-- leave_set: a waiter for several locks that gives up leaves their queues
-- on one node.
--
-- KEYS  for each lock: lock, gone, queue, queue deadlines
-- ARGV  waiter, then each lock's channel
--
-- As leave.lua, lock by lock. Replies 1.
for j = 0, #KEYS / 4 - 1 do
  redis.call('ZREM', KEYS[4 * j + 3], ARGV[1])
  redis.call('HDEL', KEYS[4 * j + 4], ARGV[1])
  if redis.call('EXISTS', KEYS[4 * j + 1]) == 0 then redis.call('PUBLISH', ARGV[2 + j], '1') end
end
return 1
