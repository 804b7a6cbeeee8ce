-- complete: remove a claimed item for good.
--
-- KEYS[1]  the queue's items hash (see items.lua)
-- ARGV[1]  id
-- ARGV[2]  owner
-- ARGV[3]  token
-- ARGV[4]  how long the done record lives, ms
-- ARGV[5]  how long the token floor lives, ms ('0': for ever)
--
-- Only the item's latest claim completes it: owner and token must be its
-- entry's. Whether the lease has run out does not matter: while no newer
-- claim was made, nobody else can hold the item, and an item whose lease
-- ran out and that went back to :pending unclaimed is taken out of it. The
-- done record, :done:<id> holding the token, makes a complete run again
-- (a client re-sent it after its reply was lost) reply 1 again, and keeps
-- add from putting the item back while it lives. The token floor,
-- :floor:<id>, keeps the id's tokens rising should it be added again
-- later (claim.lua).
--
-- Replies 1, or the error DLSTALE <token>: the item's latest token (above
-- ARGV[3] when the item was claimed again since), the token it was
-- completed with, or 0 when the queue knows nothing of it.
local v = redis.call('HGET', KEYS[1], ARGV[1])
local done = KEYS[1] .. ':done:' .. ARGV[1]
if not v then
  local d = redis.call('GET', done)
  if d == ARGV[3] then return 1 end
  return stale(d or '0')
end
local tok, _, owner = item(v)
if tok ~= ARGV[3] or owner ~= ARGV[2] then
  return stale(tok)
end
redis.call('HDEL', KEYS[1], ARGV[1])
if redis.call('ZREM', KEYS[1] .. ':active', ARGV[1]) == 1 then
  redis.call('HDEL', KEYS[1] .. ':owners', owner)
else
  redis.call('ZREM', KEYS[1] .. ':pending', ARGV[1])
end
redis.call('SET', done, tok, 'PX', ARGV[4])
setpx(KEYS[1] .. ':floor:' .. ARGV[1], tok, ARGV[5])
return 1
