-- retry: return a claimed item to the back of the queue.
--
-- KEYS[1]  the queue's items hash (see items.lua)
-- ARGV[1]  id
-- ARGV[2]  owner
-- ARGV[3]  token
--
-- Only the item's latest claim returns it, as for complete.lua. An item
-- already back in :pending under this claim (its lease ran out and a claim
-- returned it, or this retry ran before: a client re-sent it) stays where
-- it is, and the reply is 1 all the same. Publishes on :ready when it
-- returned the item.
--
-- Replies 1, or the error DLSTALE <token> as complete.lua does.
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v then
  return stale(redis.call('GET', KEYS[1] .. ':done:' .. ARGV[1]) or '0')
end
local tok, _, owner = item(v)
if tok ~= ARGV[3] or owner ~= ARGV[2] then
  return stale(tok)
end
if redis.call('ZREM', KEYS[1] .. ':active', ARGV[1]) == 1 then
  redis.call('HDEL', KEYS[1] .. ':owners', owner)
  redis.call('ZADD', KEYS[1] .. ':pending', (tail()), ARGV[1])
  redis.call('PUBLISH', KEYS[1] .. ':ready', '')
end
return 1
