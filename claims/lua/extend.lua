-- extend: keep a claim's lease running.
--
-- KEYS[1]  the queue's items hash (see items.lua)
-- ARGV[1]  id
-- ARGV[2]  owner
-- ARGV[3]  token
-- ARGV[4]  TTL, ms
--
-- Only the item's latest claim, with its lease still running by the
-- server's clock: a lease that ran out is never revived (complete and
-- retry still take it while no newer claim was made). Replies 1, or the
-- error DLSTALE <token> as complete.lua does.
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v then
  return stale(redis.call('GET', KEYS[1] .. ':done:' .. ARGV[1]) or '0')
end
local tok, _, owner = item(v)
local u = redis.call('ZSCORE', KEYS[1] .. ':active', ARGV[1])
if tok ~= ARGV[3] or owner ~= ARGV[2] or not u or tonumber(u) <= now then
  return stale(tok)
end
redis.call('ZADD', KEYS[1] .. ':active', 'XX', now + tonumber(ARGV[4]), ARGV[1])
return 1
