-- leave: a waiter that gives up leaves the queue on one node.
--
-- KEYS  lock, gone, queue, queue deadlines
-- ARGV  waiter, channel
--
-- A lock a release handed to the attempt its ticket names (hand.lua) is
-- given up with it: the waiter holds no lease of it. When the lock is
-- then free, waiters are woken, since the next one may be waiting for
-- this one. (A vote of its still on the way is refused: its attempt's
-- release recorded its owner as gone.) Replies 1.
local o = select(4, handed(KEYS[4], ARGV[1]))
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
if o and redis.call('GET', KEYS[1]) == o then redis.call('DEL', KEYS[1]) end
if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('PUBLISH', ARGV[2], '1') end
return 1
