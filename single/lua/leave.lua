-- leave: a waiter that gives up drops its ticket from the queue, and tells
-- the release channel: a free lock may have been kept for it, and the
-- waiters behind it count signals to know their turn.
--
-- KEYS[1]  the lock's hash
-- ARGV[1]  owner
--
-- Replies 1 when there was a ticket, else 0.
if redis.call('ZREM', KEYS[1] .. ':q', ARGV[1]) == 0 then return 0 end
redis.call('HDEL', KEYS[1] .. ':qx', ARGV[1])
if redis.call('HINCRBY', KEYS[1], 'waiting', -1) <= 0 then
  redis.call('HDEL', KEYS[1], 'waiting')
end
redis.call('PUBLISH', KEYS[1] .. ':released', '')
return 1
