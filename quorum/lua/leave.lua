-- leave: a waiter that gives up leaves the queue on one node.
--
-- KEYS  lock, gone, queue, queue deadlines
-- ARGV  waiter, channel
--
-- When the lock is free, waiters are woken, since the next one may be
-- waiting for this one. (A vote of its still on the way is refused: its
-- attempt's release recorded its owner as gone.) Replies 1.
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('PUBLISH', ARGV[2], '1') end
return 1
